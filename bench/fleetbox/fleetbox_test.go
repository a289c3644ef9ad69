//go:build linux

// Package fleetbox runs the fleet in a box (bench/fleet-in-a-box.sh) in
// its short form (--short --soak 60s): the packages installed on booted
// Debian hosts along the production path, a real Prometheus with the
// shipped rules, and each of its checks. Root, debootstrap and systemd-nspawn; it skips without them
// (and fails under CI=true). The 20-minute soak is `make fleet-box`.
package fleetbox

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestFleetInABoxShort(t *testing.T) {
	var missing []string
	if os.Getuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"debootstrap", "systemd-nspawn"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		msg := "fleet in a box needs " + strings.Join(missing, ", ") + " (Debian: apt-get install debootstrap systemd-container)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true: failing instead of skipping")
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../fleet-in-a-box.sh", "--short", "--soak", "60s")
	// On a timeout the script's trap powers the hosts off and cleans up.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	out, err := cmd.CombinedOutput()
	// The table of checks and the line of figures, whatever the outcome.
	var summary []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "fleetbox:") || strings.Contains(l, " pass ") || strings.Contains(l, " FAIL ") || strings.Contains(l, " skipped ") {
			summary = append(summary, l)
		}
	}
	t.Log("\n" + strings.Join(summary, "\n"))
	if err != nil {
		t.Fatalf("bench/fleet-in-a-box.sh --short: %v\n%s", err, out)
	}
}
