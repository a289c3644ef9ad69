package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
)

func TestLoadGoodRun(t *testing.T) {
	a, err := Load("testdata/good-run.yml")
	if err != nil {
		t.Fatalf("Load(good-run.yml) = %v", err)
	}
	if err := a.ValidateRun(); err != nil {
		t.Fatalf("ValidateRun = %v", err)
	}
	if a.AgentID != "db1" || a.Server.Address != "127.0.0.1:7443" || a.Server.TLS.ServerName != "localhost" ||
		a.Spool.MaxBytes != 64*bytesize.MiB || a.Intervals.Report != 10*time.Second || a.Web.ListenAddress != "127.0.0.1:9400" {
		t.Errorf("Load(good-run.yml) = %+v", a)
	}
	if len(a.Probes) != 2 {
		t.Fatalf("probes = %d, want 2", len(a.Probes))
	}
	// The second schedule: omitted keys take the schedule defaults (every
	// 3m, 50 ops: the same 1,000 ops an hour as the old hourly 1,000-op
	// run, see DefaultProbeEvery) and otherwise the `agent probe` ones; an
	// explicit 0 turns the IOPS cap and the busy guard off.
	// (internal/agent's TestProbeOptions maps them onto the engine.)
	p := a.Probes[1]
	if p.Every != 3*time.Minute || p.Ops != 50 || p.BlockSize != 8*bytesize.KiB || p.FileSize != 64*bytesize.MiB {
		t.Errorf("defaults not applied: %+v", p)
	}
	if *p.IOPS != 0 || *p.BusyThreshold != 0 || p.Sync != vocab.SyncDsync || *p.MinFree != 128*MinFree(bytesize.MiB) || *p.MinFreePercent != 0 {
		t.Errorf("probes[1] = %+v, want iops 0, busy 0, dsync, min_free 128MiB, 0%%", p)
	}
}

// The defaults restated in run.go are the probe engine's.
func TestDefaultsAreTheEngines(t *testing.T) {
	d := probe.DefaultOptions()
	var p ProbeSchedule
	p.ApplyDefaults()
	if ProbeFileUnit != probe.HeaderSize || int64(MinFreeAuto) != probe.MinFreeAuto || vocab.MaxOps != probe.MaxOps {
		t.Errorf("ProbeFileUnit %d, MinFreeAuto %d: want probe.HeaderSize %d, probe.MinFreeAuto %d", ProbeFileUnit, MinFreeAuto, probe.HeaderSize, probe.MinFreeAuto)
	}
	// The stripe-scan limits a schedule is held to are those the engine
	// refuses to exceed.
	spec, _ := vocab.LookupProbeKind(vocab.StripeScan)
	if lo, hi := spec.BlockSizes(); lo != stripescan.ReadSize || hi != stripescan.ReadSize || spec.OpsLimit() != stripescan.MaxOps {
		t.Errorf("stripe-scan spec %+v: want block size %d, at most %d ops (internal/stripescan)", spec, stripescan.ReadSize, stripescan.MaxOps)
	}
	if p.MaxDuration != d.MaxDuration || int64(p.FileSize) != d.FileSize || int(p.BlockSize) != d.BlockSize || p.QueueDepth != d.QueueDepth ||
		p.Sync != d.Sync || *p.IOPS != d.IOPS || *p.BusyThreshold != d.BusyThreshold || int64(*p.MinFree) != d.MinFreeBytes || *p.MinFreePercent != d.MinFreePercent {
		t.Errorf("schedule defaults %+v differ from probe.DefaultOptions() %+v", p, d)
	}
}

func TestRunDefaults(t *testing.T) {
	a, err := Parse([]byte("probes: [{mount_point: /data, dir: /data/p}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Spool.MaxBytes != 64*bytesize.MiB || a.Intervals.GeometryRefresh != 15*time.Minute || a.Intervals.Report != 10*time.Second {
		t.Errorf("defaults = %+v %+v", a.Spool, a.Intervals)
	}
	// The three latency kinds; the geometry probe (stripe-scan) only when
	// a schedule names it.
	if diff := cmp.Diff([]vocab.ProbeKind{probe.RandomRead, probe.RandomWrite, probe.LogWrite}, a.Probes[0].Kinds); diff != "" {
		t.Errorf("default kinds (-want +got):\n%s", diff)
	}
	if a.Probes[0].IOPS == nil || *a.Probes[0].IOPS != 100 || *a.Probes[0].BusyThreshold != 70 {
		t.Errorf("default iops/busy_threshold not 100/70")
	}
	if p := a.Probes[0]; *p.MinFree != MinFreeAuto || *p.MinFreePercent != 10 {
		t.Errorf("default floor = %s, %g%%; want auto, 10%%", p.MinFree, *p.MinFreePercent)
	}
}

func TestValidateRunNeedsServerAndSpool(t *testing.T) {
	err := Default().ValidateRun()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateRun(defaults) = %v, want ErrInvalid", err)
	}
	for _, phrase := range []string{"server.address: required", "server.tls.ca_file: required", "server.tls.key_file", "spool.dir: required"} {
		if !strings.Contains(err.Error(), phrase) {
			t.Errorf("ValidateRun(defaults) = %q, want it to mention %q", err, phrase)
		}
	}
	a, err := Parse([]byte("server: {address: 'h:1', insecure: true}\nspool: {dir: /tmp/s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ValidateRun(); err != nil {
		t.Errorf("insecure config: ValidateRun = %v", err)
	}
}

func TestWebLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9400": true, "[::1]:9400": true, "localhost:9400": true,
		"0.0.0.0:9400": false, ":9400": false, "10.0.0.1:9400": false,
	} {
		_, err := Parse([]byte("web: {listen_address: '" + addr + "'}\n"))
		if (err == nil) != ok {
			t.Errorf("web.listen_address %q: err = %v, want ok=%v", addr, err, ok)
		}
		_, err = Parse([]byte("web: {listen_address: '" + addr + "', allow_non_loopback: true}\n"))
		if err != nil {
			t.Errorf("web.listen_address %q with allow_non_loopback: %v", addr, err)
		}
	}
}

// The documented example in deploy/ must stay valid: operators copy it.
func TestDeployExampleLoads(t *testing.T) {
	a, err := LoadRun("../../../deploy/examples/agent.yaml")
	if err != nil {
		t.Fatalf("LoadRun(deploy/examples/agent.yaml) = %v", err)
	}
	if len(a.Probes) != 2 || len(a.DeclaredDevices) != 1 || a.Server.Address == "" || len(a.MaintenanceWindows) != 1 || a.Labels["role"] == "" {
		t.Errorf("example config lost keys: %+v", a)
	}
	// The small log volume's schedule runs under the default floor (10%,
	// or twice the file: internal/agent's TestProbeOptions) on a 2 GiB
	// volume: its file is a small share of the free space.
	if p := a.Probes[len(a.Probes)-1]; p.FileSize != 64*bytesize.MiB || *p.MinFree != MinFreeAuto || *p.MinFreePercent != 10 {
		t.Errorf("log volume schedule: file %s, floor %s, %g%%", p.FileSize, p.MinFree, *p.MinFreePercent)
	}
}

// A schedule naming stripe-scan is held to the kind's spec (one 8 KiB
// block size, at most 2,000 ops, a 16 MiB file, queue depth 1); the keys
// of a schedule apply to each of its kinds, so a message names the kind
// that refuses a value and, when the schedule has several, says to give
// it a schedule of its own.
func TestStripeScanSchedule(t *testing.T) {
	const geo = "probes: [{mount_point: /data, dir: /data/p, kinds: [stripe-scan], every: 6h, ops: 2000, iops: 100, file_size: 64MiB}]\n"
	a, err := Parse([]byte(geo))
	if err != nil {
		t.Fatalf("Parse(geometry schedule) = %v", err)
	}
	if p := a.Probes[0]; p.BlockSize != 8*bytesize.KiB || p.QueueDepth != 1 || p.Ops != 2000 {
		t.Errorf("geometry schedule = %+v, want the default 8KiB at queue depth 1, 2000 ops", p)
	}
	for _, ok := range []string{
		// The defaults of the other keys suit every kind.
		"probes: [{mount_point: /data, dir: /data/p, kinds: [random-read, log-write, stripe-scan]}]\n",
		// Two schedules for one mount point, each with its own budget.
		"probes: [{mount_point: /data, dir: /data/p, ops: 5000, block_size: 64KiB, queue_depth: 4},\n" +
			"         {mount_point: /data, dir: /data/p, kinds: [stripe-scan], ops: 2000}]\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%q) = %v", ok, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"{kinds: [stripe-scan], block_size: 16KiB}", "probes[0].block_size 16KiB: stripe-scan wants 8KiB"},
		{"{kinds: [stripe-scan], block_size: 4KiB}", "probes[0].block_size 4KiB: stripe-scan wants 8KiB"},
		{"{kinds: [stripe-scan], ops: 2001}", "probes[0].ops 2001: stripe-scan wants 1 to 2000"},
		{"{kinds: [stripe-scan], file_size: 8MiB}", "probes[0].file_size 8MiB: stripe-scan wants at least 16MiB"},
		{"{kinds: [stripe-scan], queue_depth: 4}", "probes[0].queue_depth 4: stripe-scan wants 1"},
		{"{kinds: [random-read, stripe-scan], ops: 5000}", "probes[0].ops 5000: stripe-scan wants 1 to 2000 (the schedule's keys apply to each of its kinds: give stripe-scan a schedule of its own"},
		{"{kinds: [random-read, stripe-scan], block_size: 64KiB}", "probes[0].block_size 64KiB: stripe-scan wants 8KiB (the schedule's keys apply"},
		{"{kinds: [log-write, stripe-scan], block_size: 128KiB}", "probes[0].block_size 128KiB: log-write wants 512B to 64KiB (the schedule's keys apply to each of its kinds: give log-write"},
		{"{kinds: [random-read, stripe-scan], queue_depth: 8}", "probes[0].queue_depth 8: stripe-scan wants 1 (the schedule's keys apply"},
	} {
		y := "probes: [{mount_point: /data, dir: /data/p, " + tc.yaml[1:] + "]\n"
		_, err := Parse([]byte(y))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v\nwant ErrInvalid mentioning %q", tc.yaml, err, tc.want)
		}
	}
	// Without stripe-scan, nothing of its spec applies.
	if _, err := Parse([]byte("probes: [{mount_point: /data, dir: /data/p, kinds: [random-read], ops: 5000, block_size: 64KiB, file_size: 4MiB, queue_depth: 8}]\n")); err != nil {
		t.Errorf("random-read alone: %v", err)
	}
}

// Schedules with one dir share one probe file: a second file_size would
// rewrite it at every run (and a stripe-scan after a rewrite infers
// nothing), so it is refused; the same size, or a dir of its own, is fine.
func TestSharedProbeFile(t *testing.T) {
	const lat = "probes: [{mount_point: /data, dir: /data/p, file_size: 1GiB},\n"
	for _, ok := range []string{
		lat + "         {mount_point: /data, dir: /data/p/, kinds: [stripe-scan], ops: 2000, every: 6h, file_size: 1GiB}]\n",
		lat + "         {mount_point: /data, dir: /data/geometry, kinds: [stripe-scan], ops: 2000, every: 6h, file_size: 64MiB}]\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%q) = %v", ok, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{lat + "         {mount_point: /data, dir: /data/p/, kinds: [stripe-scan], ops: 2000, every: 6h, file_size: 64MiB}]\n",
			"probes[1].file_size 64MiB: probes[0] has the same dir with file_size 1GiB"},
		{"probes: [{mount_point: 'D:/', dir: 'D:\\P'}, {mount_point: 'D:/', dir: 'd:/p', kinds: [stripe-scan], file_size: 64MiB}]\n",
			"probes[1].file_size 64MiB: probes[0] has the same dir with file_size 1GiB"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v\nwant ErrInvalid mentioning %q", tc.yaml, err, tc.want)
		}
	}
}

// The example's commented geometry schedule is valid once uncommented:
// operators uncomment it.
func TestDeployExampleGeometrySchedule(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/examples/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := slices.Index(lines, "  # Uncomment to run it:")
	if at < 0 {
		t.Fatal("deploy/examples/agent.yaml: no commented geometry schedule (\"  # Uncomment to run it:\")")
	}
	n := 0
	for i := at + 1; i < len(lines) && strings.HasPrefix(lines[i], "  # "); i++ {
		lines[i] = "  " + strings.TrimPrefix(lines[i], "  # ")
		n++
	}
	f := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := LoadRun(f)
	if err != nil {
		t.Fatalf("the example with its %d-line geometry schedule uncommented: %v", n, err)
	}
	p := a.Probes[len(a.Probes)-1]
	if len(a.Probes) != 3 || !slices.Equal(p.Kinds, []vocab.ProbeKind{vocab.StripeScan}) || p.Ops != vocab.StripeScanMaxOps || p.Every != 6*time.Hour || *p.IOPS != 100 {
		t.Errorf("uncommented geometry schedule = %+v (of %d), want stripe-scan, 2000 ops every 6h at 100 IOPS", p, len(a.Probes))
	}
}

// A schedule that names no ops runs its kinds' own budget when every kind
// has one: a stripe-scan schedule's is the kind's 2,000 (50 reads never
// infer a stripe unit), the default kinds' and a mixed schedule's is
// DefaultProbeOps; ops given are kept.
func TestScheduleDefaultOps(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{"{kinds: [stripe-scan]}", vocab.StripeScanMaxOps},
		{"{kinds: [stripe-scan], ops: 300}", 300},
		{"{}", DefaultProbeOps},
		{"{kinds: [random-read]}", DefaultProbeOps},
		{"{kinds: [random-read, stripe-scan]}", DefaultProbeOps},
	} {
		y := "probes: [{mount_point: /data, dir: /data/p, " + tc.yaml[1:] + "]\n"
		a, err := Parse([]byte(y))
		if err != nil {
			t.Fatalf("Parse(%s) = %v", tc.yaml, err)
		}
		if got := a.Probes[0].Ops; got != tc.want {
			t.Errorf("Parse(%s): ops %d, want %d", tc.yaml, got, tc.want)
		}
	}
}

// TestDatabaseDefaults: an entry names only what it must; the rest takes
// the defaults (every 60s, timeout 5s; PostgreSQL on a socket directory:
// port 5432, database postgres).
func TestDatabaseDefaults(t *testing.T) {
	a, err := Parse([]byte(`databases:
  - {name: main, engine: postgresql, address: /var/run/postgresql, user: plumbline}
  - {name: shop, engine: mariadb, address: "127.0.0.1:3306", user: plumbline, password_file: /etc/pw, every: 30s}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []DatabaseSource{
		{Name: "main", Engine: vocab.EnginePostgreSQL, Address: "/var/run/postgresql", Port: 5432, Database: "postgres", User: "plumbline", Every: time.Minute, Timeout: 5 * time.Second},
		{Name: "shop", Engine: vocab.EngineMariaDB, Address: "127.0.0.1:3306", User: "plumbline", PasswordFile: "/etc/pw", Every: 30 * time.Second, Timeout: 5 * time.Second},
	}
	if diff := cmp.Diff(want, a.Databases); diff != "" {
		t.Errorf("databases (-want +got):\n%s", diff)
	}
}
