//go:build !linux

// Command db-attribution needs Linux (FUSE, loop devices, the databases).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "db-attribution: Linux only (the RAID lab needs FUSE and loop devices)")
	os.Exit(2)
}
