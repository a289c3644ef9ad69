//go:build !linux

// Command seeds needs Linux (see main.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "seeds: the lab needs Linux")
	os.Exit(1)
}
