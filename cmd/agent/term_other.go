//go:build !linux && !windows

package main

// isTerminal: progress display is only for Linux and Windows terminals.
func isTerminal(fd uintptr) bool { return false }
