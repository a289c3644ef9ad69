package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
)

// inspectJSON is the part of `agent inspect --format json` these tests read,
// decoded by the documented field names, as a script would.
type inspectJSON struct {
	Host struct {
		Hostname string `json:"hostname"`
	} `json:"host"`
	Volumes []struct {
		MountPoint string `json:"mount_point"`
		Device     string `json:"device"`
		Filesystem struct {
			Type             string `json:"type"`
			BlockSizeBytes   uint64 `json:"block_size_bytes"`
			StripeUnitBytes  uint64 `json:"stripe_unit_bytes"`
			StripeWidthBytes uint64 `json:"stripe_width_bytes"`
		} `json:"filesystem"`
		Layers []struct {
			Kind                string  `json:"kind"`
			Device              string  `json:"device"`
			OffsetBytes         *uint64 `json:"offset_bytes"`
			LogicalSectorBytes  uint64  `json:"logical_sector_bytes"`
			PhysicalSectorBytes uint64  `json:"physical_sector_bytes"`
			RaidLevel           string  `json:"raid_level"`
			StripeUnitBytes     uint64  `json:"stripe_unit_bytes"`
			RaidDisks           uint64  `json:"raid_disks"`
			Source              string  `json:"source"`
		} `json:"layers"`
		Alignment struct {
			Verdict          string             `json:"verdict"`
			DataOffsetBytes  *uint64            `json:"data_offset_bytes"`
			StripeUnitBytes  uint64             `json:"stripe_unit_bytes"`
			StripeUnitSource string             `json:"stripe_unit_source"`
			SplitFraction    map[string]float64 `json:"split_fraction"`
			Findings         []struct {
				Rule        string `json:"rule"`
				Severity    string `json:"severity"`
				Message     string `json:"message"`
				Remediation string `json:"remediation"`
			} `json:"findings"`
		} `json:"alignment"`
	} `json:"volumes"`
}

// stack is one real device stack built for the test and what inspect must say.
type stack struct {
	name        string
	sectorSize  int    // losetup --sector-size
	label       string // msdos or gpt
	startSector int64  // in the device's logical sectors
	fs          string
	mkfsArgs    []string
	declare     string // declared_devices raid: block, or ""

	verdict     string
	dataOffset  uint64
	stripeUnit  uint64
	stripeSrc   string
	split8K     float64
	fsUnit      uint64 // expected file-system stripe hints
	fsWidth     uint64
	rules       []string // rules that must be present
	absentRules []string // rules that must not be
}

func TestInspectRealDevices(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4", "mkfs.xfs")
	const raid10 = "{level: raid10, stripe_unit: 64KiB, disks: 4}"
	stacks := []stack{
		{
			name: "63 sectors, ext4 stride hints, declared raid10", sectorSize: 512, label: "msdos", startSector: 63,
			fs: "ext4", mkfsArgs: []string{"-b", "4096", "-E", "stride=16,stripe_width=32"}, declare: raid10,
			verdict: "misaligned", dataOffset: 32256, stripeUnit: 65536, stripeSrc: "declared", split8K: 0.125,
			fsUnit: 65536, fsWidth: 131072,
			rules: []string{"partition-offset-stripe-unit"}, absentRules: []string{"fs-stripe-hints-mismatch"},
		},
		{
			name: "63 sectors, ext4 stride hints only", sectorSize: 512, label: "msdos", startSector: 63,
			fs: "ext4", mkfsArgs: []string{"-b", "4096", "-E", "stride=16,stripe_width=32"},
			verdict: "misaligned", dataOffset: 32256, stripeUnit: 65536, stripeSrc: "superblock", split8K: 0.125,
			fsUnit: 65536, fsWidth: 131072,
			rules: []string{"partition-offset-stripe-unit"},
		},
		{
			name: "128 sectors, xfs su=64k sw=2, declared raid10", sectorSize: 512, label: "msdos", startSector: 128,
			fs: "xfs", mkfsArgs: []string{"-d", "su=64k,sw=2"}, declare: raid10,
			verdict: "aligned", dataOffset: 65536, stripeUnit: 65536, stripeSrc: "declared", split8K: 0,
			fsUnit: 65536, fsWidth: 131072,
			absentRules: []string{"partition-offset-stripe-unit", "fs-stripe-hints-mismatch", "fs-stripe-hints-missing"},
		},
		{
			name: "2048 sectors, ext4 without hints, nothing declared", sectorSize: 512, label: "msdos", startSector: 2048,
			fs: "ext4", verdict: "aligned",
			rules: []string{"stripe-unit-unknown"},
		},
		{
			name: "2048 sectors, xfs with wrong hints, declared raid10", sectorSize: 512, label: "gpt", startSector: 2048,
			fs: "xfs", mkfsArgs: []string{"-d", "su=32k,sw=4"}, declare: raid10,
			verdict: "aligned", dataOffset: 1 << 20, stripeUnit: 65536, stripeSrc: "declared",
			fsUnit: 32768, fsWidth: 131072,
			rules: []string{"fs-stripe-hints-mismatch"},
		},
		{
			name: "4Kn, 256 sectors, xfs", sectorSize: 4096, label: "gpt", startSector: 256,
			fs: "xfs", verdict: "aligned",
			rules: []string{"stripe-unit-unknown"},
		},
	}

	var cfg strings.Builder
	var mounts []string
	devs := make([]loopdev.Device, len(stacks))
	for i, s := range stacks {
		d := loopdev.New(t, loopdev.Options{SizeBytes: 1 << 30, SectorSize: s.sectorSize})
		devs[i] = d
		part := loopdev.Partition(t, d, s.label, s.startSector, 0)
		loopdev.Mkfs(t, part, s.fs, s.mkfsArgs...)
		mounts = append(mounts, loopdev.Mount(t, part))
		if s.declare != "" {
			fmt.Fprintf(&cfg, "  - device: %s\n    raid: %s\n", d.Path, s.declare)
		}
	}
	config := "include:\n  mount_points:\n"
	for _, m := range mounts {
		config += fmt.Sprintf("    - %q\n", m)
	}
	if cfg.Len() > 0 {
		config += "declared_devices:\n" + cfg.String()
	}
	cfgFile := filepath.Join(t.TempDir(), "agent.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"inspect", "--config", cfgFile, "--format", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("agent inspect exit %d: %s", code, stderr.String())
	}
	var got inspectJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("agent inspect --format json: %v\n%s", err, stdout.String())
	}
	if len(got.Volumes) != len(stacks) {
		t.Fatalf("agent inspect found %d volumes, want %d (the include list selects only this test's mounts)\n%s", len(got.Volumes), len(stacks), stdout.String())
	}
	byMount := map[string]int{}
	for i, v := range got.Volumes {
		byMount[v.MountPoint] = i
	}

	for i, s := range stacks {
		t.Run(s.name, func(t *testing.T) {
			vi, ok := byMount[mounts[i]]
			if !ok {
				t.Fatalf("volume %s missing from inspect output", mounts[i])
			}
			v := got.Volumes[vi]
			a := v.Alignment
			if v.Filesystem.Type != s.fs {
				t.Errorf("filesystem.type = %q, want %q", v.Filesystem.Type, s.fs)
			}
			if a.Verdict != s.verdict {
				t.Errorf("verdict = %q, want %q; findings %+v", a.Verdict, s.verdict, a.Findings)
			}
			// The partition layer carries the real starting offset in bytes.
			var part, disk bool
			for _, l := range v.Layers {
				switch l.Kind {
				case "partition":
					part = true
					want := uint64(s.startSector) * uint64(s.sectorSize)
					if l.OffsetBytes == nil || *l.OffsetBytes != want {
						t.Errorf("partition offset_bytes = %v, want %d", l.OffsetBytes, want)
					}
				case "disk", "raid":
					disk = true
					if l.LogicalSectorBytes != uint64(s.sectorSize) || l.PhysicalSectorBytes != uint64(s.sectorSize) {
						t.Errorf("%s sectors = %d/%d, want %d/%d", l.Device, l.LogicalSectorBytes, l.PhysicalSectorBytes, s.sectorSize, s.sectorSize)
					}
					if s.declare != "" && (l.Kind != "raid" || l.RaidLevel != "raid10" || l.StripeUnitBytes != 65536 || l.RaidDisks != 4) {
						t.Errorf("declared device layer = %+v, want kind raid, raid10, 64 KiB, 4 disks", l)
					}
				}
			}
			if !part || !disk {
				t.Errorf("layers = %+v, want a partition and a disk/raid layer", v.Layers)
			}
			if s.stripeUnit != 0 {
				if a.StripeUnitBytes != s.stripeUnit || a.StripeUnitSource != s.stripeSrc {
					t.Errorf("stripe unit = %d from %q, want %d from %q", a.StripeUnitBytes, a.StripeUnitSource, s.stripeUnit, s.stripeSrc)
				}
				if a.DataOffsetBytes == nil || *a.DataOffsetBytes != s.dataOffset {
					t.Errorf("data_offset_bytes = %v, want %d", a.DataOffsetBytes, s.dataOffset)
				}
				if got := a.SplitFraction["8192"]; got != s.split8K {
					t.Errorf("split_fraction[8192] = %v, want %v", got, s.split8K)
				}
			}
			if v.Filesystem.StripeUnitBytes != s.fsUnit || v.Filesystem.StripeWidthBytes != s.fsWidth {
				t.Errorf("filesystem stripe hints = %d/%d, want %d/%d", v.Filesystem.StripeUnitBytes, v.Filesystem.StripeWidthBytes, s.fsUnit, s.fsWidth)
			}
			have := map[string]bool{}
			for _, f := range a.Findings {
				have[f.Rule] = true
			}
			for _, r := range s.rules {
				if !have[r] {
					t.Errorf("findings %+v lack rule %s", a.Findings, r)
				}
			}
			for _, r := range s.absentRules {
				if have[r] {
					t.Errorf("findings %+v have rule %s, want it absent", a.Findings, r)
				}
			}
		})
	}

	// The table names every volume and the verdicts, and --fail-on turns a
	// misaligned volume into exit status 3 for scripts.
	stdout.Reset()
	stderr.Reset()
	code := run(t.Context(), []string{"inspect", "--config", cfgFile, "--fail-on", "misaligned"}, &stdout, &stderr)
	if code != exitFailedOn {
		t.Errorf("agent inspect --fail-on misaligned = exit %d, want %d; stderr %s", code, exitFailedOn, stderr.String())
	}
	for _, m := range mounts {
		if !strings.Contains(stdout.String(), m) {
			t.Errorf("table output lacks %s:\n%s", m, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "misaligned") || !strings.Contains(stdout.String(), "fix: ") {
		t.Errorf("table output lacks a verdict or a fix:\n%s", stdout.String())
	}
}

func TestInspectUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect", "--format", "yaml"}, exitUsage, `--format "yaml"`},
		{[]string{"inspect", "--fail-on", "aligned"}, exitUsage, `--fail-on "aligned"`},
		{[]string{"inspect", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"inspect", "--config", "/nonexistent/agent.yml"}, exitError, "no such file"},
		{[]string{"inspect", "--path.sysfs", "/nonexistent-sysfs"}, exitError, "/nonexistent-sysfs"},
		{[]string{"inspect", "--path.procfs", "/nonexistent-procfs"}, exitError, "/nonexistent-procfs"},
		{[]string{"nosuchcommand"}, exitUsage, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("agent %v = exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, stderr.String(), tt.code, tt.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(t.TempDir(), "bad.yml")
	os.WriteFile(bad, []byte("declared_devices:\n  - device: /dev/sdb\n    raid: {level: raid7, stripe_unit: 64KiB, disks: 4}\n"), 0o644)
	if code := run(t.Context(), []string{"inspect", "--config", bad}, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "raid7") {
		t.Errorf("agent inspect with a bad config = exit %d, %q; want exit 1 naming raid7", code, stderr.String())
	}
}
