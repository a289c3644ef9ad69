package main

import (
	"context"
	"fmt"
	"io"
)

// runProbe is being built in the probe-engine issue.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agent probe: not built yet")
	return 1
}
