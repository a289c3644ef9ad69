package policy

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

func sched(mp string, every time.Duration) agentkeys.ProbeSchedule {
	return agentkeys.ProbeSchedule{MountPoint: mp, Dir: mp + "/.p", Every: every}
}

func TestSelectorMatches(t *testing.T) {
	pg := map[string]string{"role": "postgres", "env": "prod-eu"}
	for _, tc := range []struct {
		name string
		sel  Selector
		f    Facts
		want bool
	}{
		{"empty selects every host", Selector{}, Facts{Hostname: "x"}, true},
		{"host glob", Selector{Hosts: []string{"db-*"}}, Facts{Hostname: "db-17"}, true},
		{"host glob miss", Selector{Hosts: []string{"db-*"}}, Facts{Hostname: "web-1"}, false},
		{"any host glob is enough", Selector{Hosts: []string{"web-*", "db-?"}}, Facts{Hostname: "db-7"}, true},
		{"glob does not cross dots as a prefix", Selector{Hosts: []string{"db-*.eu"}}, Facts{Hostname: "db-1.us"}, false},
		{"label equal", Selector{Labels: map[string]string{"role": "postgres"}}, Facts{Labels: pg}, true},
		{"label value glob", Selector{Labels: map[string]string{"env": "prod-*"}}, Facts{Labels: pg}, true},
		{"label differs", Selector{Labels: map[string]string{"role": "mysql"}}, Facts{Labels: pg}, false},
		{"label missing", Selector{Labels: map[string]string{"tier": "*"}}, Facts{Labels: pg}, false},
		{"star asks only that it exists", Selector{Labels: map[string]string{"role": "*"}}, Facts{Labels: pg}, true},
		{"every label must match", Selector{Labels: map[string]string{"role": "postgres", "env": "prod-us"}}, Facts{Labels: pg}, false},
		{"host and labels both", Selector{Hosts: []string{"db-*"}, Labels: map[string]string{"role": "postgres"}}, Facts{Hostname: "web-1", Labels: pg}, false},
		{"no labels at all", Selector{Labels: map[string]string{"role": "postgres"}}, Facts{Hostname: "db-1"}, false},
	} {
		if got := tc.sel.Matches(tc.f); got != tc.want {
			t.Errorf("%s: Matches(%+v) = %v, want %v", tc.name, tc.f, got, tc.want)
		}
	}
}

// Several entries match: the first that sets a key gives it (with its
// enforce); windows of all of them apply; intervals by key.
func TestResolvePrecedence(t *testing.T) {
	win := func(n string) maintenance.Window {
		return maintenance.Window{Name: n, Schedule: "0 2 * * *", Duration: time.Hour}
	}
	entries := []Entry{
		{Name: "pg-prod", Select: Selector{Labels: map[string]string{"role": "postgres", "env": "prod"}},
			Policy: Fragment{Enforce: []string{KeyProbes}, Probes: []agentkeys.ProbeSchedule{sched("/pgdata", time.Hour)}, MaintenanceWindows: []maintenance.Window{win("pg-backup")},
				Intervals: Intervals{Report: 30 * time.Second}}},
		{Name: "db-hosts", Select: Selector{Hosts: []string{"db-*"}},
			Policy: Fragment{Probes: []agentkeys.ProbeSchedule{sched("/data", time.Minute)}, DeclaredDevices: []agentkeys.DeclaredDevice{{Device: "/dev/sdb"}},
				MaintenanceWindows: []maintenance.Window{win("patch")}, Intervals: Intervals{Report: time.Minute, GeometryRefresh: time.Hour}}},
		{Name: "web", Select: Selector{Hosts: []string{"web-*"}}, Policy: Fragment{MaintenanceWindows: []maintenance.Window{win("web")}}},
	}
	for _, tc := range []struct {
		name        string
		f           Facts
		sources     []string
		probesMount string
		enforce     []string
		windows     []string
		devices     int
		report      time.Duration
	}{
		{"both db entries", Facts{Hostname: "db-1", Labels: map[string]string{"role": "postgres", "env": "prod"}},
			[]string{"pg-prod", "db-hosts"}, "/pgdata", []string{KeyProbes}, []string{"pg-backup", "patch"}, 1, 30 * time.Second},
		{"host glob only", Facts{Hostname: "db-2", Labels: map[string]string{"role": "mysql"}},
			[]string{"db-hosts"}, "/data", nil, []string{"patch"}, 1, time.Minute},
		{"labels only", Facts{Hostname: "pg-9", Labels: map[string]string{"role": "postgres", "env": "prod"}},
			[]string{"pg-prod"}, "/pgdata", []string{KeyProbes}, []string{"pg-backup"}, 0, 30 * time.Second},
		{"nothing matches", Facts{Hostname: "cache-1"}, nil, "", nil, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Resolve(entries, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Sources, tc.sources) {
				t.Errorf("sources = %v, want %v", r.Sources, tc.sources)
			}
			mount := ""
			if len(r.Fragment.Probes) > 0 {
				mount = r.Fragment.Probes[0].MountPoint
			}
			var wins []string
			for _, w := range r.Fragment.MaintenanceWindows {
				wins = append(wins, w.Name)
			}
			if mount != tc.probesMount || !slices.Equal(r.Fragment.Enforce, tc.enforce) || !slices.Equal(wins, tc.windows) ||
				len(r.Fragment.DeclaredDevices) != tc.devices || r.Fragment.Intervals.Report != tc.report {
				t.Errorf("Resolve = probes on %q, enforce %v, windows %v, %d devices, report %s; want %q, %v, %v, %d, %s",
					mount, r.Fragment.Enforce, wins, len(r.Fragment.DeclaredDevices), r.Fragment.Intervals.Report, tc.probesMount, tc.enforce, tc.windows, tc.devices, tc.report)
			}
			if (len(r.YAML) == 0) != (tc.sources == nil) || (len(r.Digest) == 0) != (tc.sources == nil) {
				t.Errorf("YAML %d bytes, digest %x: want both exactly when an entry matches", len(r.YAML), r.Digest)
			}
		})
	}
}

// The wire form round-trips: what the server marshals, the agent parses
// back to the same fragment; the digest follows the content.
func TestFragmentRoundTrip(t *testing.T) {
	iops := 0.0
	f := Fragment{Enforce: []string{KeyDeclaredDevices},
		Probes:             []agentkeys.ProbeSchedule{{MountPoint: "/data", Dir: "/data/.p", Every: 5 * time.Minute, IOPS: &iops}},
		DeclaredDevices:    []agentkeys.DeclaredDevice{{Device: "/dev/sdb", RAID: agentkeys.DeclaredRAID{Level: "raid10", StripeUnit: 64 << 10, Disks: 4}}},
		MaintenanceWindows: []maintenance.Window{{Name: "b", Schedule: "30 1 * * sun", Duration: 90 * time.Minute, TimeZone: "Asia/Tokyo"}},
		Intervals:          Intervals{Report: 15 * time.Second}}
	r, err := Resolve([]Entry{{Name: "all", Policy: f}}, Facts{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFragment(r.YAML)
	if err != nil {
		t.Fatalf("ParseFragment(%s) = %v", r.YAML, err)
	}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Errorf("round trip (-sent +parsed):\n%s\n%s", diff, r.YAML)
	}
	f.Probes[0].Every = 6 * time.Minute
	r2, _ := Resolve([]Entry{{Name: "all", Policy: f}}, Facts{})
	if string(r2.Digest) == string(r.Digest) {
		t.Error("digest unchanged after the policy changed")
	}
}

func TestValidate(t *testing.T) {
	good := Entry{Name: "a", Policy: Fragment{Probes: []agentkeys.ProbeSchedule{sched("/data", time.Minute)}}}
	if err := Validate([]Entry{good}); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	for _, tc := range []struct {
		name   string
		e      []Entry
		phrase string
	}{
		{"duplicate name", []Entry{good, good}, "used twice"},
		{"no name", []Entry{{}}, "policies[0].name"},
		{"bad host glob", []Entry{{Name: "a", Select: Selector{Hosts: []string{"db-["}}}}, "policies[0].select: hosts[0]"},
		{"bad label key", []Entry{{Name: "a", Select: Selector{Labels: map[string]string{"role/x/y": "x"}}}}, "label key"},
		{"label keys differing in case", []Entry{{Name: "a", Select: Selector{Labels: map[string]string{"Role": "x", "role": "y"}}}}, "case-insensitive"},
		{"enforce unknown key", []Entry{{Name: "a", Policy: Fragment{Enforce: []string{"maintenance_windows"}}}}, "enforce[0]"},
		{"bad probe", []Entry{{Name: "a", Policy: Fragment{Probes: []agentkeys.ProbeSchedule{{MountPoint: "/d", Dir: "rel"}}}}}, "probes[0].dir"},
		{"bad window", []Entry{{Name: "a", Policy: Fragment{MaintenanceWindows: []maintenance.Window{{Name: "w", Schedule: "nope", Duration: time.Hour}}}}}, "maintenance_windows[0]"},
		{"bad interval", []Entry{{Name: "a", Policy: Fragment{Intervals: Intervals{Report: time.Millisecond}}}}, "intervals.report"},
	} {
		err := Validate(tc.e)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.phrase) {
			t.Errorf("%s: Validate = %v, want ErrInvalid naming %q", tc.name, err, tc.phrase)
		}
	}
	// As YAML, the way the server's configuration holds it.
	var e []Entry
	err := strictyaml.Decode([]byte("- name: a\n  select: {hosts: [db-*]}\n  policy:\n    probes: [{mount_point: /data, dir: /data/.p}]\n    maintenance_windowz: []\n"), &e)
	if err == nil || !strings.Contains(err.Error(), "maintenance_windows") {
		t.Errorf("unknown key: %v, want a suggestion of maintenance_windows", err)
	}
}

// Selectors come from operators' files and labels from agents: matching
// never panics and agrees with itself.
func FuzzSelector(f *testing.F) {
	f.Add("db-*", "role", "post*", "db-1", "postgres")
	f.Add("[", "Role", "\\", "", "")
	f.Fuzz(func(t *testing.T, glob, key, val, host, label string) {
		s := Selector{Hosts: []string{glob}, Labels: map[string]string{key: val}}
		_ = s.Validate()
		m := s.Matches(Facts{Hostname: host, Labels: map[string]string{key: label}})
		_, herr := path.Match(glob, "")
		_, lerr := path.Match(val, "")
		if m && (herr != nil || lerr != nil) {
			t.Fatalf("selector %+v with a malformed glob matched", s)
		}
		if m != s.Matches(Facts{Hostname: host, Labels: map[string]string{key: label}}) {
			t.Fatal("Matches is not deterministic")
		}
		if err := labels.Check(map[string]string{key: label}); err == nil && key == "" {
			t.Fatal("empty label key accepted")
		}
	})
}

// The agent parses the fragment the server sends: any bytes give a
// fragment or an ErrInvalid, never a panic; an accepted fragment
// round-trips through the wire form.
func FuzzParseFragment(f *testing.F) {
	f.Add([]byte("probes: [{mount_point: /data, dir: /data/.p, every: 5m}]\nenforce: [probes]\n"))
	f.Add([]byte("maintenance_windows: [{name: b, schedule: '0 2 * * *', duration: 2h, time_zone: Europe/Berlin}]\n"))
	f.Add([]byte("intervals: {report: 1ms}\n"))
	f.Add([]byte("declared_devices: [{device: /dev/sdb, raid: {level: raid5, stripe_unit: 64KiB, disks: 3}}]\n"))
	f.Add([]byte("- [\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 64<<10 {
			return
		}
		frag, err := ParseFragment(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseFragment error %v does not wrap ErrInvalid", err)
			}
			return
		}
		r, err := Resolve([]Entry{{Name: "x", Policy: frag}}, Facts{})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseFragment(r.YAML)
		if err != nil {
			t.Fatalf("re-parsing the marshalled fragment: %v\n%s", err, r.YAML)
		}
		r2, _ := Resolve([]Entry{{Name: "x", Policy: again}}, Facts{})
		if string(r2.Digest) != string(r.Digest) {
			t.Fatalf("the fragment does not round-trip:\n%s\n%s", r.YAML, r2.YAML)
		}
	})
}
