package policy_test

import (
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/policy"
)

// The server validates a fragment as the agent validates the same keys in
// its file: what one refuses the other refuses, naming the same key.
func TestFragmentValidatesAsTheAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, key string }{
		{"probes:\n  - {mount_point: /data, dir: relative}\n", "probes[0].dir"},
		{"probes:\n  - {mount_point: data, dir: /data/p}\n", "probes[0].mount_point"},
		{"probes:\n  - {mount_point: /data, dir: /data/p, block_size: 3KiB}\n", "probes[0].block_size"},
		{"probes:\n  - {mount_point: /data, dir: /data/p, kinds: [stripe-scan], queue_depth: 4}\n", "probes[0].queue_depth"},
		{"probes:\n  - {mount_point: /a, dir: /p}\n  - {mount_point: /b, dir: /p/, file_size: 64MiB}\n", "probes[1].file_size"},
		{"declared_devices:\n  - {device: /dev/sdb, raid: {level: raid5, disks: 2, stripe_unit: 64KiB}}\n", "declared_devices[0].raid.disks"},
		{"declared_devices:\n  - {device: sdb, raid: {level: raid1, disks: 2}}\n", "declared_devices[0].device"},
		{"maintenance_windows:\n  - {name: x, schedule: \"not cron\", duration: 1h}\n", "maintenance_windows[0]"},
	} {
		_, agentErr := config.Parse([]byte(tc.yaml))
		_, serverErr := policy.ParseFragment([]byte(tc.yaml))
		if agentErr == nil || !strings.Contains(agentErr.Error(), tc.key) {
			t.Errorf("config.Parse(%q) = %v, want an error naming %s", tc.yaml, agentErr, tc.key)
		}
		if serverErr == nil || !strings.Contains(serverErr.Error(), tc.key) {
			t.Errorf("policy.ParseFragment(%q) = %v, want an error naming %s", tc.yaml, serverErr, tc.key)
		}
	}
	good := "probes:\n  - {mount_point: /data, dir: /data/p}\ndeclared_devices:\n  - {device: /dev/sdb, raid: {level: raid10, disks: 4, stripe_unit: 64KiB}}\n"
	if _, err := config.Parse([]byte(good)); err != nil {
		t.Errorf("config.Parse(good) = %v", err)
	}
	if _, err := policy.ParseFragment([]byte(good)); err != nil {
		t.Errorf("policy.ParseFragment(good) = %v", err)
	}
}
