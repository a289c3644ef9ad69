package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/geometry"
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
		"bad-size-syntax.yml":    "IEC suffix",
		"bad-disks.yml":          "raid5 needs at least 3 disks",
		"bad-raid10-odd.yml":     "even number",
		"bad-device.yml":         "under /dev/",
		"bad-device-escape.yml":  "under /dev/",
		"bad-duplicate.yml":      "declared twice",
		"bad-unknown-key.yml":    "field cache not found",
		"bad-typo.yml":           "field declard_devices not found",
		"bad-glob.yml":           "mount_points[0]",
		"bad-shape.yml":          "cannot unmarshal",
		"bad-missing-stripe.yml": "stripe_unit: required",
		"bad-spans.yml":          "spans 3",

		"bad-server-address.yml":     `server.address "localhost"`,
		"bad-spool-max.yml":          "spool.max_bytes 100KiB",
		"bad-report-interval.yml":    "intervals.report 1ms",
		"bad-interval-syntax.yml":    "time.Duration",
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
		"bad-probe-min-free.yml":     `"5GB"`,
		"bad-probe-min-free-pct.yml": "probes[0].min_free_percent 100",
		"bad-probe-sync.yml":         `probes[0].sync "osync"`,
		"bad-probe-qd.yml":           "probes[0].queue_depth 1000",
		"bad-probe-twice.yml":        "scheduled twice",
		"bad-probe-unknown-key.yml":  "field iodepth not found",
		"bad-agent-id.yml":           `agent_id "db 1"`,
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
		})
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
