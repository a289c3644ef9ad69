//go:build !windows

package main

import (
	"context"
	"fmt"
	"io"
)

// runService is Windows-only; elsewhere the service manager is systemd.
func runService(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agent service: Windows only; on Linux run `agent run` under systemd (deploy/systemd/plumbline-agent.service)")
	return 2
}
