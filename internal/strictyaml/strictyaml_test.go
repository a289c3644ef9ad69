package strictyaml

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/bytesize"
)

type raid struct {
	Level      string        `yaml:"level"`
	StripeUnit bytesize.Size `yaml:"stripe_unit"`
	Disks      uint32        `yaml:"disks"`
}

type device struct {
	Device string `yaml:"device"`
	RAID   raid   `yaml:"raid"`
}

type probeSched struct {
	Every    time.Duration `yaml:"every"`
	Ops      int           `yaml:"ops"`
	IOPS     *float64      `yaml:"iops"`
	FileSize bytesize.Size `yaml:"file_size"`
}

type conf struct {
	DeclaredDevices []device     `yaml:"declared_devices"`
	Probes          []probeSched `yaml:"probes"`
	ReadSuperblocks bool         `yaml:"read_superblocks"`
	Labels          map[string]string
	Hidden          string `yaml:"-"`
}

func TestDecodeGood(t *testing.T) {
	t.Parallel()
	in := `
declared_devices:
  - device: /dev/sdb
    raid: {level: raid10, stripe_unit: 64k, disks: 4}
probes:
  - every: 5m
    ops: 200
    iops: 50
    file_size: 64MB
labels: {team: db}
`
	got := conf{ReadSuperblocks: true}
	if err := Decode([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	iops := 50.0
	want := conf{
		DeclaredDevices: []device{{Device: "/dev/sdb", RAID: raid{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}}},
		Probes:          []probeSched{{Every: 5 * time.Minute, Ops: 200, IOPS: &iops, FileSize: 64 * bytesize.MiB}},
		ReadSuperblocks: true, // a default the file does not mention
		Labels:          map[string]string{"team": "db"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Decode (-want +got):\n%s", d)
	}
	for _, empty := range []string{"", "# only a comment\n", "---\n"} {
		c := conf{ReadSuperblocks: true}
		if err := Decode([]byte(empty), &c); err != nil || !c.ReadSuperblocks {
			t.Errorf("Decode(%q) = %v, %+v; want the defaults kept", empty, err, c)
		}
	}
}

// TestDecodeErrors: each error names the key path and line, in the
// file's words, never a Go type.
func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string // one line per error, in order
	}{
		{"typo at the top", "declared_device: []\n", []string{
			`line 1: unknown key "declared_device" (did you mean "declared_devices"?); valid keys at the top level: declared_devices, probes, read_superblocks, labels`,
		}},
		{"typo nested", "declared_devices:\n  - device: /dev/sdb\n    raid: {levle: raid0}\n", []string{
			`line 3: declared_devices[0].raid: unknown key "levle" (did you mean "level"?); valid keys in declared_devices[0].raid: level, stripe_unit, disks`,
		}},
		{"no suggestion for a stranger", "cache: 1\n", []string{
			`line 1: unknown key "cache"; valid keys at the top level: declared_devices, probes, read_superblocks, labels`,
		}},
		{"a tagged-out field is no key", "hidden: x\n", []string{
			`line 1: unknown key "hidden"; valid keys at the top level: declared_devices, probes, read_superblocks, labels`,
		}},
		{"bad size names the key", "probes:\n  - file_size: 64XB\n", []string{
			`line 2: probes[0].file_size: invalid size "64XB": want a whole number of bytes with an optional unit, K, M, G or T (KiB, KB and K all mean 1024)`,
		}},
		{"bad duration", "probes:\n  - every: 5 minutes\n", []string{
			`line 2: probes[0].every: "5 minutes" is not a duration (e.g. 500ms, 30s, 15m, 1h)`,
		}},
		{"bad number", "probes:\n  - ops: lots\n    iops: fast\n", []string{
			`line 2: probes[0].ops: "lots" is not a whole number`,
			`line 3: probes[0].iops: "fast" is not a number`,
		}},
		{"negative unsigned", "declared_devices:\n  - raid: {disks: -4}\n", []string{
			`line 2: declared_devices[0].raid.disks: "-4" is not a whole number, 0 or more`,
		}},
		{"bool", "read_superblocks: maybe\n", []string{
			`line 1: read_superblocks: "maybe" is not true or false`,
		}},
		{"shape: mapping for list", "declared_devices: {device: /dev/sdb}\n", []string{
			`line 1: declared_devices: want a list, got a mapping`,
		}},
		{"shape: scalar for struct", "probes:\n  - 5m\n", []string{
			`line 2: probes[0]: want a mapping of keys (every, ops, iops, file_size), got "5m"`,
		}},
		{"shape: list for size", "probes:\n  - file_size: [1]\n", []string{
			`line 2: probes[0].file_size: want a valid value, got a list`,
		}},
		{"key twice", "read_superblocks: true\nread_superblocks: false\n", []string{
			`line 2: read_superblocks: key given twice`,
		}},
		{"two documents", "read_superblocks: true\n---\nread_superblocks: false\n", []string{
			`line 2: a second YAML document (---); the file holds one`,
		}},
		{"syntax", "probes: [\n", nil},
		{"every error, in order", "cach: 1\nread_superblocks: 3\nprobes:\n  - ops: x\n", []string{
			`line 1: unknown key "cach"; valid keys at the top level: declared_devices, probes, read_superblocks, labels`,
			`line 2: read_superblocks: "3" is not true or false`,
			`line 4: probes[0].ops: "x" is not a whole number`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c conf
			err := Decode([]byte(tc.in), &c)
			if err == nil {
				t.Fatalf("Decode(%q) = nil, want an error", tc.in)
			}
			msg := err.Error()
			if strings.Contains(msg, "strictyaml.") || strings.Contains(msg, "bytesize.") || strings.Contains(msg, "time.Duration") || strings.Contains(msg, "!!") {
				t.Errorf("error shows Go or YAML type names: %s", msg)
			}
			if tc.want == nil {
				if !strings.HasPrefix(msg, "not valid YAML: line ") {
					t.Errorf("error = %q, want a YAML syntax error with its line", msg)
				}
				return
			}
			if d := cmp.Diff(tc.want, strings.Split(msg, "\n")); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	valid := []string{"declared_devices", "include", "exclude", "read_superblocks", "lvm_backup_dir", "server", "spool"}
	for in, want := range map[string]string{
		"declared_device":  "declared_devices",
		"declaredDevices":  "declared_devices",
		"Declared_Devices": "declared_devices",
		"includes":         "include",
		"excluded":         "exclude",
		"spol":             "spool",
		"devices":          "declared_devices",
		"xyz":              "",
		"spooling":         "spool",
		"servers":          "server",
		"probe_dir":        "",
	} {
		got := suggest(in, valid)
		if want == "" && got != "" || want != "" && got != ` (did you mean "`+want+`"?)` {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("declared_devices:\n  - device: /dev/sdb\n    raid: {level: raid10, stripe_unit: 64k, disks: 4}\n"))
	f.Add([]byte("probes: [{every: 5m, ops: 3, file_size: 1GiB}]\nlabels: {a: b}\n"))
	f.Add([]byte("a: &x [1]\nprobes: *x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c conf
		err := Decode(b, &c)
		if err != nil && strings.Contains(err.Error(), "strictyaml.conf") {
			t.Fatalf("error names a Go type: %v", err)
		}
	})
}

func TestLinesAndWithLines(t *testing.T) {
	t.Parallel()
	b := []byte("# comment\ndeclared_devices:\n  - device: /dev/sdb\n    raid:\n      level: raid7\nprobes:\n  - ops: 0\n    every: 1s\n")
	lines := Lines(b)
	for path, want := range map[string]int{"declared_devices": 2, "declared_devices[0]": 3, "declared_devices[0].device": 3,
		"declared_devices[0].raid": 4, "declared_devices[0].raid.level": 5, "probes[0].ops": 7, "probes[0].every": 8} {
		if lines[path] != want {
			t.Errorf("Lines()[%q] = %d, want %d", path, lines[path], want)
		}
	}
	sentinel := errors.New("invalid configuration")
	err := fmt.Errorf("%w: %w", sentinel, errors.Join(
		errors.New(`declared_devices[0].raid.level "raid7": want one of raid0, raid1`),
		errors.New(`declared_devices[0].raid.stripe_unit: required for raid7`), // absent: its mapping's line
		errors.New(`probes[0].ops 0: want 1 to 100000`),
		errors.New(`server.address: required`), // not in the file
		errors.New(`line 9: already placed`),
	))
	got := WithLines(err, lines)
	want := "invalid configuration: line 5: declared_devices[0].raid.level \"raid7\": want one of raid0, raid1\n" +
		"line 4: declared_devices[0].raid.stripe_unit: required for raid7\n" +
		"line 7: probes[0].ops 0: want 1 to 100000\n" +
		"server.address: required\n" +
		"line 9: already placed"
	if got.Error() != want {
		t.Errorf("WithLines =\n%s\nwant\n%s", got, want)
	}
	if !errors.Is(got, sentinel) {
		t.Error("WithLines lost the wrapped error")
	}
	// A value a flag set (path mapped to 0) gets no line, not its parent's.
	lines["probes[0].ops"] = 0
	if got := WithLines(errors.New("probes[0].ops 0: want 1 to 100000"), lines).Error(); got != "probes[0].ops 0: want 1 to 100000" {
		t.Errorf("WithLines of a flag's value = %q, want no line", got)
	}
	if WithLines(nil, lines) != nil {
		t.Error("WithLines(nil) != nil")
	}
}
