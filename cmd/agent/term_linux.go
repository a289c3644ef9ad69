package main

import "golang.org/x/sys/unix"

// isTerminal says whether fd is a terminal (TCGETS succeeds on it).
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
