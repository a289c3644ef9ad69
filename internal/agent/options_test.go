package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
)

// Every schedule key maps onto the probe engine's option of the same name.
func TestProbeOptions(t *testing.T) {
	a, err := config.Load("config/testdata/good-run.yml")
	if err != nil {
		t.Fatal(err)
	}
	got := ProbeOptions(a.Probes[0], probe.RandomWrite)
	want := probe.DefaultOptions()
	want.Dir, want.Kind, want.Jitter = "/var/lib/pgsql/.plumbline", probe.RandomWrite, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProbeOptions (-want +got):\n%s", diff)
	}
	// An explicit 0 turns the IOPS cap and the busy guard off; log-write
	// runs at queue depth 1.
	o := ProbeOptions(a.Probes[1], probe.LogWrite)
	if o.IOPS != 0 || o.BusyThreshold != 0 || o.QueueDepth != 1 || o.Sync != probe.SyncDsync {
		t.Errorf("ProbeOptions(log-write) = %+v, want iops 0, busy 0, qd 1, dsync", o)
	}
	// The free-space floor is the schedule's: a small log volume's probe
	// can run with a floor of its own.
	if o.MinFreeBytes != 128<<20 || o.MinFreePercent != 0 || o.FreeSpaceFloor(2<<30) != 128<<20 {
		t.Errorf("ProbeOptions(log-write) floor = %d bytes, %g%%; want 128MiB, 0%%", o.MinFreeBytes, o.MinFreePercent)
	}
	d, err := config.Parse([]byte("probes: [{mount_point: /data, dir: /data/p}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := ProbeOptions(d.Probes[0], probe.RandomRead); o.MinFreeBytes != probe.MinFreeAuto || o.MinFreePercent != 10 {
		t.Errorf("default floor = %d bytes, %g%%; want auto, 10%%", o.MinFreeBytes, o.MinFreePercent)
	}
	e, err := config.LoadRun("../../deploy/examples/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The example's small log volume runs under the default floor on a
	// 2 GiB volume: its file is a small share of the free space.
	if o := ProbeOptions(e.Probes[len(e.Probes)-1], probe.LogWrite); o.FileSize != 64<<20 || o.FreeSpaceFloor(2<<30) != 2<<30/10 {
		t.Errorf("log volume schedule: file %d, floor on 2 GiB %d", o.FileSize, o.FreeSpaceFloor(2<<30))
	}
}
