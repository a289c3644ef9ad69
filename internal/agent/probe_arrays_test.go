package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agent/probe"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
)

// writeMDSync writes an md array's sync attributes as the kernel does
// (sync_speed in KiB/s).
func writeMDSync(t *testing.T, sys, dev, action, completed, speed string) {
	t.Helper()
	md := filepath.Join(sys, "block", dev, "md")
	if err := os.MkdirAll(md, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"sync_action": action, "sync_completed": completed, "sync_speed": speed} {
		if err := os.WriteFile(filepath.Join(md, f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mdInventory is one volume on md0 (a raid1 of sdb and sdc) and md1, a
// raid0 md2 and a hardware RAID.
func mdInventory(context.Context) (Discovery, error) {
	inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}}
	inv.Volumes = append(inv.Volumes, &plumblinev1.Volume{
		MountPoint: "/data1", Device: "/dev/md0",
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "md0"},
			{Kind: geometry.KindRAID, Device: "md0", Below: []string{"sdb", "sdc"}},
			{Kind: geometry.KindRAID, Device: "md1", Below: []string{"sdd"}},
			{Kind: geometry.KindRAID, Device: "md0"},
			{Kind: geometry.KindRAID, Device: "md2", RaidLevel: "raid0"}, // no sync action
			{Kind: geometry.KindRAID, Device: "sdz"},                     // a declared hardware RAID
			{Kind: "disk", Device: "sdb"}, {Kind: "disk", Device: "sdc"},
		},
	})
	return Discovery{Inventory: inv}, nil
}

// spooledProbes decodes the probe results in a's spool.
func spooledProbes(t *testing.T, a *Agent) []*plumblinev1.ProbeResult {
	t.Helper()
	recs, err := a.Spool().Read(100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []*plumblinev1.ProbeResult
	for _, r := range recs {
		m := &plumblinev1.Record{}
		if err := proto.Unmarshal(r.Data, m); err != nil {
			t.Fatal(err)
		}
		if p := m.GetProbe(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// A run records the md arrays under its volume that ran a sync action at
// its start or its end: an action that started during the run with its
// figures at the end, one that finished during the run with its figures at
// the start; an idle array is not recorded.
func TestProbeRunMarksArrayActivity(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "db1")
	dir := t.TempDir()
	sys := filepath.Join(dir, "sys")
	writeMDSync(t, sys, "md0", "idle", "none", "none")
	writeMDSync(t, sys, "md1", "recover", "1000 / 4000", "2048")
	c := testConfig("127.0.0.1:1", p, dir)
	fp := &fakeProber{}
	prober := func(ctx context.Context, o probe.Options) (probe.Result, error) {
		// During the run: md0 starts resyncing, md1's recovery ends.
		writeMDSync(t, sys, "md0", "resync", "300 / 1200", "100")
		writeMDSync(t, sys, "md1", "idle", "none", "none")
		return fp.run(ctx, o)
	}
	tc, id, err := ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{
		Config: c, AgentID: id, Version: "test", Creds: credentials.NewTLS(tc),
		Discover: mdInventory, Probe: prober, MountPoll: 20 * time.Millisecond,
		Geometry: geometry.Options{SysfsRoot: sys},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := mdInventory(t.Context())
	tg := targetsFor(d.Inventory.GetVolumes(), c.Probes)[0]
	if got := tg.arrays; len(got) != 2 || got[0] != "md0" || got[1] != "md1" {
		t.Fatalf("target arrays = %v, want [md0 md1]", got)
	}
	a.probeOnce(t.Context(), tg)
	probes := spooledProbes(t, a)
	if len(probes) != 1 {
		t.Fatalf("%d probe results spooled, want 1", len(probes))
	}
	want := []*plumblinev1.ArrayActivity{
		{Device: "md0", SyncAction: "resync", SyncCompletedSectors: 300, SyncTotalSectors: 1200, SyncSpeedBytesPerSecond: 100 << 10},
		{Device: "md1", SyncAction: "recover", SyncCompletedSectors: 1000, SyncTotalSectors: 4000, SyncSpeedBytesPerSecond: 2048 << 10},
	}
	got := probes[0].GetArrayActivity()
	if len(got) != len(want) {
		t.Fatalf("array activity = %v, want %v", got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("array activity[%d] = %v, want %v", i, got[i], want[i])
		}
	}

	// Both idle (and an array whose sync_action is unreadable): no mark.
	writeMDSync(t, sys, "md0", "idle", "none", "none")
	if err := os.Remove(filepath.Join(sys, "block", "md1", "md", "sync_action")); err != nil {
		t.Fatal(err)
	}
	if got := arrayActivity(a.mdSyncs(tg), a.mdSyncs(tg)); len(got) != 0 {
		t.Errorf("idle arrays marked: %v", got)
	}
}
