//go:build !linux

// Command tails needs Linux (FUSE, loop devices).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "tails: Linux only (the RAID lab needs FUSE and loop devices)")
	os.Exit(2)
}
