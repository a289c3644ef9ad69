//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "raidlab: the lab needs Linux (FUSE and loop devices)")
	os.Exit(1)
}
