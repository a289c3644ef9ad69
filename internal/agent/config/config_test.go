package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/bytesize"
)

func TestLoadGood(t *testing.T) {
	a, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatalf("Load(good.yml) = %v", err)
	}
	o := a.GeometryOptions(geometry.DefaultOptions())
	want := []geometry.DeclaredDevice{
		{Device: "/dev/sdb", RAID: geometry.DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}},
		{Device: "/dev/disk/by-id/scsi-36d4ae5209bc954001e7f7e2b0a8f2c41", RAID: geometry.DeclaredRAID{Level: "raid5", StripeUnit: 128 * bytesize.KiB, Disks: 5}},
	}
	if diff := cmp.Diff(want, o.Declared); diff != "" {
		t.Errorf("declared devices (-want +got):\n%s", diff)
	}
	if !o.ReadSuperblocks || o.LVMBackupDir != "/etc/lvm/backup" {
		t.Errorf("defaults lost: read_superblocks=%v lvm_backup_dir=%q", o.ReadSuperblocks, o.LVMBackupDir)
	}
	if diff := cmp.Diff([]string{"/var/lib/*", "/data"}, o.IncludeMountPoints); diff != "" {
		t.Errorf("include mount points (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"vfat"}, o.ExcludeFSTypes); diff != "" {
		t.Errorf("exclude fs types (-want +got):\n%s", diff)
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	a, err := Parse(nil)
	if err != nil {
		t.Fatalf("Parse(empty) = %v", err)
	}
	if diff := cmp.Diff(Default(), a); diff != "" {
		t.Errorf("Parse(empty) (-want +got):\n%s", diff)
	}
}

func TestExplicitFalseKept(t *testing.T) {
	a, err := Parse([]byte("read_superblocks: false\n"))
	if err != nil || a.ReadSuperblocks {
		t.Fatalf("Parse(read_superblocks: false) = %+v, %v; want false", a, err)
	}
}

func TestLoadBad(t *testing.T) {
	// Each bad file, and a phrase its error must contain so the operator
	// knows what to fix.
	want := map[string]string{
		"bad-level.yml":          `raid.level "raid7"`,
		"bad-stripe-unit.yml":    "power of two",
		"bad-size-syntax.yml":    `line 3: declared_devices[0].raid.stripe_unit: invalid size "64 kilobytes"`,
		"bad-disks.yml":          "raid5 needs at least 3 disks",
		"bad-raid10-odd.yml":     "even number",
		"bad-device.yml":         "under /dev/",
		"bad-device-escape.yml":  "under /dev/",
		"bad-duplicate.yml":      "declared twice",
		"bad-unknown-key.yml":    `line 3: declared_devices[0].raid: unknown key "cache"; valid keys in declared_devices[0].raid: level, stripe_unit, disks, spans`,
		"bad-typo.yml":           `line 1: unknown key "declard_devices" (did you mean "declared_devices"?); valid keys at the top level: declared_devices, include, exclude,`,
		"bad-glob.yml":           "mount_points[0]",
		"bad-shape.yml":          "line 1: declared_devices: want a list, got a mapping",
		"bad-missing-stripe.yml": "stripe_unit: required",
		"bad-spans.yml":          "spans 3",

		"bad-server-address.yml":     `server.address "localhost"`,
		"bad-server-addresses.yml":   `server.addresses[1] "plumbline-3.example": want host:port`,
		"bad-spool-max.yml":          "spool.max_bytes 100KiB",
		"bad-report-interval.yml":    "intervals.report 1ms",
		"bad-interval-syntax.yml":    `line 1: intervals.geometry_refresh: "soon" is not a duration`,
		"bad-web-public.yml":         "not a loopback address",
		"bad-web-all-interfaces.yml": "not a loopback address",
		"bad-probe-kind.yml":         `probes[0].kinds[0] "seq-read"`,
		"bad-probe-dir.yml":          "probes[0].dir",
		"bad-probe-mount-glob.yml":   "probes[0].mount_point",
		"bad-probe-block-size.yml":   "probes[0].block_size 3KiB",
		"bad-probe-log-block.yml":    "log-write wants 512B to 64KiB",
		"bad-probe-file-size.yml":    "probes[0].file_size",
		"bad-probe-ops.yml":          "probes[0].ops -1",
		"bad-probe-max-duration.yml": "probes[0].max_duration 2m0s",
		"bad-probe-busy.yml":         "probes[0].busy_threshold 120",
		"bad-probe-min-free.yml":     `line 1: probes[0].min_free: invalid size "5 gigs"`,
		"bad-probe-min-free-pct.yml": "probes[0].min_free_percent 100",
		"bad-probe-sync.yml":         `probes[0].sync "osync"`,
		"bad-probe-qd.yml":           "probes[0].queue_depth 1000",
		"bad-probe-twice.yml":        "scheduled twice",
		"bad-probe-unknown-key.yml":  `line 1: probes[0]: unknown key "iodepth"; valid keys in probes[0]: mount_point, dir, kinds,`,
		"bad-agent-id.yml":           `agent_id "db 1"`,
		"bad-window-schedule.yml":    `line 2: maintenance_windows[0]: invalid maintenance window: schedule "0 25 * * *"`,
		"bad-window-zone.yml":        `maintenance_windows[0]: invalid maintenance window: time_zone "Europe/Berlinn"`,
		"bad-window-key.yml":         `unknown key "timezone" (did you mean "time_zone"?)`,
		"bad-label-key.yml":          `labels: label key "Role:"`,
		"bad-label-case.yml":         "keys are case-insensitive",
		"bad-db-engine.yml":          `databases[0].engine "oracle": want postgresql, mysql or mariadb`,
		"bad-db-password.yml":        `line 2: databases[0]: unknown key "password"`,
		"bad-db-address.yml":         `databases[0].address "localhost": want host:port or an absolute socket path`,
		"bad-db-name-twice.yml":      `databases[1].name "main": used twice`,
		"bad-db-every.yml":           "databases[0].every 1s: want 10s to 1h0m0s",
		"bad-db-timeout.yml":         "databases[0].timeout 10s",
		"bad-db-database.yml":        "databases[0].database: only for postgresql",
		"bad-db-root.yml":            `databases[0].root "var/lib/machines/pg"`,
	}
	files, _ := filepath.Glob("testdata/bad-*.yml")
	if len(files) != len(want) {
		t.Errorf("found %d bad-*.yml files, the table has %d", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load(%s) = %v, want ErrInvalid", f, err)
			}
			if phrase := want[filepath.Base(f)]; !strings.Contains(err.Error(), phrase) {
				t.Errorf("Load(%s) = %q, want it to mention %q", f, err, phrase)
			}
			// The operator's words, never Go's.
			for _, goWord := range []string{"config.", "bytesize.", "time.Duration", "!!str", "cannot unmarshal"} {
				if strings.Contains(err.Error(), goWord) {
					t.Errorf("Load(%s) = %q: names a Go or YAML type (%s)", f, err, goWord)
				}
			}
		})
	}
}

// TestSizeSpellings: every spelling of a unit is the same power of 1024
// (64k, 64K, 64KB, 64kb, 64KiB, 64kib).
func TestSizeSpellings(t *testing.T) {
	for _, su := range []string{"64k", "64K", "64KB", "64kb", "64kB", "64KiB", "64kib", "65536"} {
		a, err := Parse([]byte("declared_devices:\n  - device: /dev/sdb\n    raid: {level: raid0, stripe_unit: " + su + ", disks: 2}\n"))
		if err != nil {
			t.Errorf("stripe_unit: %s: %v", su, err)
			continue
		}
		if got := a.DeclaredDevices[0].RAID.StripeUnit; got != 64*bytesize.KiB {
			t.Errorf("stripe_unit: %s = %d, want 65536", su, got)
		}
	}
}

// TestUnknownKeySuggestion: the typo of the issue report gets the key it
// meant, its line, and the valid keys.
func TestUnknownKeySuggestion(t *testing.T) {
	_, err := Parse([]byte("# RAID behind a controller\ndeclared_device:\n  - device: /dev/sdb\n"))
	want := `invalid configuration: line 2: unknown key "declared_device" (did you mean "declared_devices"?); valid keys at the top level: declared_devices, include, exclude, read_superblocks, lvm_backup_dir, agent_id, server, spool, intervals, probes, web`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Parse = %v\nwant %s...", err, want)
	}
}

// TestValidationErrorsHaveLines: a value that parses but is wrong is
// reported with its key path and its line too.
func TestValidationErrorsHaveLines(t *testing.T) {
	_, err := Parse([]byte("declared_devices:\n  - device: /dev/sdb\n    raid:\n      level: raid7\nprobes:\n  - mount_point: /data\n    dir: /data/p\n    ops: -1\n"))
	for _, want := range []string{`line 4: declared_devices[0].raid.level "raid7"`, "line 8: probes[0].ops -1: want 1 to"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse = %v\nwant it to contain %q", err, want)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse = %v, want ErrInvalid", err)
	}
}

// TestOverrideFiles: keys of an override file replace the main file's
// (lists whole), defaults still fill what neither sets, and errors in an
// override file name it.
func TestOverrideFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("agent.yaml", `server: {address: 127.0.0.1:7443, insecure: true}
agent_id: dev
spool: {dir: /tmp/spool}
probes:
  - {mount_point: /, dir: /tmp/probe, every: 5m}
override_files: [agent.local.yaml]
`)
	write("agent.local.yaml", `# mine
declared_devices:
  - device: /dev/sdb
    raid: {level: raid10, stripe_unit: 64k, disks: 4}
probes:
  - {mount_point: /data, dir: /data/probe, kinds: [random-read]}
`)
	a, err := LoadRun(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.DeclaredDevices) != 1 || a.DeclaredDevices[0].RAID.StripeUnit != 64*bytesize.KiB {
		t.Errorf("declared_devices = %+v, want the override's raid10", a.DeclaredDevices)
	}
	if len(a.Probes) != 1 || a.Probes[0].MountPoint != "/data" || a.Probes[0].Every != DefaultProbeEvery {
		t.Errorf("probes = %+v, want only the override's, with defaults filled", a.Probes)
	}
	if a.Server.Address != "127.0.0.1:7443" || a.AgentID != "dev" {
		t.Errorf("server.address %q agent_id %q: the main file's keys were lost", a.Server.Address, a.AgentID)
	}

	write("agent.local.yaml", "declared_devices:\n  - device: /dev/sdb\n    raid: {level: raid10, stripe_unit: 64 kilobytes, disks: 4}\n")
	_, err = LoadRun(main)
	if err == nil || !strings.Contains(err.Error(), "override file "+filepath.Join(dir, "agent.local.yaml")+": line 3: declared_devices[0].raid.stripe_unit") {
		t.Errorf("bad override = %v, want its file, line and key", err)
	}
	write("agent.local.yaml", "override_files: [more.yaml]\n")
	if _, err = LoadRun(main); err == nil || !strings.Contains(err.Error(), "cannot name more") {
		t.Errorf("nested override_files = %v, want refused", err)
	}
	os.Remove(filepath.Join(dir, "agent.local.yaml"))
	if _, err = LoadRun(main); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "override_files[0]") {
		t.Errorf("missing override file = %v, want ErrNotExist naming override_files[0]", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/good.yml", "testdata/bad-shape.yml"} {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b)
		if err == nil {
			if verr := a.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
			}
		}
	})
}
