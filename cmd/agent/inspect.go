package main

import (
	"context"
	"fmt"
	"io"
)

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agent inspect: not built yet")
	return 1
}
