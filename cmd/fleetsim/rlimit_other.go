//go:build !unix

package main

// raiseFileLimit has nothing to raise here; 0 means "no limit known".
func raiseFileLimit() (uint64, error) { return 0, nil }
