package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/probe"
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
	// Every key maps onto the probe engine's option of the same name.
	got := a.Probes[0].ProbeOptions(probe.RandomWrite)
	want := probe.DefaultOptions()
	want.Dir, want.Kind, want.Jitter = "/var/lib/pgsql/.plumbline", probe.RandomWrite, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProbeOptions (-want +got):\n%s", diff)
	}
	// The second schedule: omitted keys take the schedule defaults (every
	// 3m, 50 ops: the same 1,000 ops an hour as the old hourly 1,000-op
	// run, see DefaultProbeEvery) and otherwise the `agent probe` ones; an
	// explicit 0 turns the IOPS cap and the busy guard off.
	p := a.Probes[1]
	if p.Every != 3*time.Minute || p.Ops != 50 || p.BlockSize != 8*bytesize.KiB || p.FileSize != 64*bytesize.MiB {
		t.Errorf("defaults not applied: %+v", p)
	}
	o := p.ProbeOptions(probe.LogWrite)
	if o.IOPS != 0 || o.BusyThreshold != 0 || o.QueueDepth != 1 || o.Sync != probe.SyncDsync {
		t.Errorf("ProbeOptions(log-write) = %+v, want iops 0, busy 0, qd 1, dsync", o)
	}
	// The free-space floor is the schedule's: a small log volume's probe
	// can run with a floor of its own.
	if o.MinFreeBytes != 128<<20 || o.MinFreePercent != 0 || o.FreeSpaceFloor(2<<30) != 128<<20 {
		t.Errorf("ProbeOptions(log-write) floor = %d bytes, %g%%; want 128MiB, 0%%", o.MinFreeBytes, o.MinFreePercent)
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
	if diff := cmp.Diff(probe.Kinds(), a.Probes[0].Kinds); diff != "" {
		t.Errorf("default kinds (-want +got):\n%s", diff)
	}
	if a.Probes[0].IOPS == nil || *a.Probes[0].IOPS != 100 || *a.Probes[0].BusyThreshold != 70 {
		t.Errorf("default iops/busy_threshold not 100/70")
	}
	if o := a.Probes[0].ProbeOptions(probe.RandomRead); o.MinFreeBytes != probe.MinFreeAuto || o.MinFreePercent != 10 {
		t.Errorf("default floor = %d bytes, %g%%; want auto, 10%%", o.MinFreeBytes, o.MinFreePercent)
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
	a, err := LoadRun("../../deploy/examples/agent.yaml")
	if err != nil {
		t.Fatalf("LoadRun(deploy/examples/agent.yaml) = %v", err)
	}
	if len(a.Probes) != 2 || len(a.DeclaredDevices) != 1 || a.Server.Address == "" {
		t.Errorf("example config lost keys: %+v", a)
	}
	// The small log volume's schedule runs under the default floor on a
	// 2 GiB volume: its file is a small share of the free space.
	if o := a.Probes[len(a.Probes)-1].ProbeOptions(probe.LogWrite); o.FileSize != 64<<20 || o.FreeSpaceFloor(2<<30) != 2<<30/10 {
		t.Errorf("log volume schedule: file %d, floor on 2 GiB %d", o.FileSize, o.FreeSpaceFloor(2<<30))
	}
}
