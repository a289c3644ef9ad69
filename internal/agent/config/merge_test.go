package config

import (
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/policy"
)

// The merge rule, key by key (the table in Merge's comment).
func TestMerge(t *testing.T) {
	localProbes := []ProbeSchedule{sched("/local", time.Minute)}
	centralProbes := []ProbeSchedule{sched("/central", time.Hour)}
	localDev := []DeclaredDevice{{Device: "/dev/sdl"}}
	centralDev := []DeclaredDevice{{Device: "/dev/sdc"}}
	lw := maintenance.Window{Name: "local", Schedule: "0 1 * * *", Duration: time.Hour}
	cw := maintenance.Window{Name: "central", Schedule: "0 3 * * *", Duration: time.Hour}
	for _, tc := range []struct {
		name            string
		local           Agent
		central         *policy.Fragment
		probes, devices string // mount point / device of the result, "" none
		windows         string
		report          time.Duration
		origin          map[string]string
	}{
		{"no central policy", Agent{Probes: localProbes, DeclaredDevices: localDev}, nil, "/local", "/dev/sdl", "", 10 * time.Second,
			map[string]string{policy.KeyProbes: "local", policy.KeyDeclaredDevices: "local"}},
		{"local wins when both set", Agent{Probes: localProbes, DeclaredDevices: localDev}, &policy.Fragment{Probes: centralProbes, DeclaredDevices: centralDev}, "/local", "/dev/sdl", "", 10 * time.Second,
			map[string]string{policy.KeyProbes: "local", policy.KeyDeclaredDevices: "local"}},
		{"central fills what local lacks", Agent{}, &policy.Fragment{Probes: centralProbes, DeclaredDevices: centralDev}, "/central", "/dev/sdc", "", 10 * time.Second,
			map[string]string{policy.KeyProbes: "central", policy.KeyDeclaredDevices: "central"}},
		{"enforced central wins", Agent{Probes: localProbes, DeclaredDevices: localDev}, &policy.Fragment{Enforce: []string{policy.KeyProbes}, Probes: centralProbes, DeclaredDevices: centralDev}, "/central", "/dev/sdl", "", 10 * time.Second,
			map[string]string{policy.KeyProbes: "central (enforced)", policy.KeyDeclaredDevices: "local"}},
		{"enforce without a central value keeps local", Agent{Probes: localProbes}, &policy.Fragment{Enforce: []string{policy.KeyProbes}}, "/local", "", "", 10 * time.Second,
			map[string]string{policy.KeyProbes: "local", policy.KeyDeclaredDevices: "none"}},
		{"windows of both apply", Agent{MaintenanceWindows: []maintenance.Window{lw}}, &policy.Fragment{MaintenanceWindows: []maintenance.Window{cw}}, "", "", "local,central", 10 * time.Second,
			map[string]string{"maintenance_windows": "local + central"}},
		{"central windows alone", Agent{}, &policy.Fragment{MaintenanceWindows: []maintenance.Window{cw}}, "", "", "central", 10 * time.Second,
			map[string]string{"maintenance_windows": "central"}},
		{"central intervals win", Agent{}, &policy.Fragment{Intervals: policy.Intervals{Report: time.Minute}}, "", "", "", time.Minute,
			map[string]string{"intervals": "central"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := tc.local
			local.Intervals = Default().Intervals
			eff, o := Merge(local, tc.central)
			first := func(n int, f func() string) string {
				if n == 0 {
					return ""
				}
				return f()
			}
			probes := first(len(eff.Probes), func() string { return eff.Probes[0].MountPoint })
			devices := first(len(eff.DeclaredDevices), func() string { return eff.DeclaredDevices[0].Device })
			var wins []string
			for _, w := range eff.MaintenanceWindows {
				wins = append(wins, w.Name)
			}
			if probes != tc.probes || devices != tc.devices || strings.Join(wins, ",") != tc.windows || eff.Intervals.Report != tc.report {
				t.Errorf("Merge = probes %q, devices %q, windows %v, report %s; want %q, %q, %q, %s", probes, devices, wins, eff.Intervals.Report, tc.probes, tc.devices, tc.windows, tc.report)
			}
			for k, want := range tc.origin {
				if o[k] != want {
					t.Errorf("origin of %s = %q, want %q", k, o[k], want)
				}
			}
		})
	}
}

// The merge never writes into the local configuration's lists, and its
// result has the schedule defaults filled in.
func TestMergeCopiesAndDefaults(t *testing.T) {
	local := Agent{MaintenanceWindows: make([]maintenance.Window, 1, 4)}
	local.MaintenanceWindows[0] = maintenance.Window{Name: "l"}
	central := &policy.Fragment{Probes: []ProbeSchedule{{MountPoint: "/d", Dir: "/d/p"}}, MaintenanceWindows: []maintenance.Window{{Name: "c"}}}
	eff, _ := Merge(local, central)
	if got := local.MaintenanceWindows[:2][1].Name; got != "" {
		t.Errorf("Merge wrote %q into the local list's spare capacity", got)
	}
	if central.Probes[0].Every != 0 {
		t.Error("Merge filled defaults into the central fragment")
	}
	if eff.Probes[0].Every != DefaultProbeEvery || eff.Probes[0].Ops != DefaultProbeOps {
		t.Errorf("effective schedule %+v: defaults not applied", eff.Probes[0])
	}
	b, err := Print(eff, Origins{policy.KeyProbes: "central"}, []string{"all"})
	if err != nil || !strings.Contains(string(b), "#   probes:") || !strings.Contains(string(b), "mount_point: /d") {
		t.Errorf("Print = %s, %v", b, err)
	}
}

// Database sources merge as probes do: the local list, the central one
// where the local file has none or the entry enforces it; defaults filled.
func TestMergeDatabases(t *testing.T) {
	local := []DatabaseSource{{Name: "local", Engine: "postgresql", Address: "/run/postgresql", User: "p"}}
	central := []DatabaseSource{{Name: "central", Engine: "mariadb", Address: "/run/mysqld/mysqld.sock", User: "p"}}
	for _, tc := range []struct {
		name   string
		local  []DatabaseSource
		frag   *policy.Fragment
		want   string
		origin string
	}{
		{"local only", local, nil, "local", "local"},
		{"local wins", local, &policy.Fragment{Databases: central}, "local", "local"},
		{"central fills", nil, &policy.Fragment{Databases: central}, "central", "central"},
		{"enforced", local, &policy.Fragment{Enforce: []string{policy.KeyDatabases}, Databases: central}, "central", "central (enforced)"},
	} {
		eff, o := Merge(Agent{Databases: tc.local}, tc.frag)
		if len(eff.Databases) != 1 || eff.Databases[0].Name != tc.want || eff.Databases[0].Every != time.Minute || o[policy.KeyDatabases] != tc.origin {
			t.Errorf("%s: Merge = %+v (origin %q), want %s with defaults (origin %q)", tc.name, eff.Databases, o[policy.KeyDatabases], tc.want, tc.origin)
		}
	}
	if err := (policy.Fragment{Databases: []DatabaseSource{{Name: "x", Engine: "oracle"}}}).Validate(); err == nil || !strings.Contains(err.Error(), "databases[0].engine") {
		t.Errorf("a fragment with a bad database source validated: %v", err)
	}
}

func sched(mp string, every time.Duration) ProbeSchedule {
	return ProbeSchedule{MountPoint: mp, Dir: mp + "/.p", Every: every}
}
