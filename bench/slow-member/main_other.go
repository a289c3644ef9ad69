//go:build !linux

// Command slow-member needs Linux (FUSE, loop devices, /proc/diskstats).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "slow-member: Linux only (the RAID lab needs FUSE and loop devices)")
	os.Exit(2)
}
