package main

import "golang.org/x/sys/windows"

// isTerminal says whether fd is a console (GetConsoleMode succeeds on it).
func isTerminal(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
