package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// fakeMountTable is a mountTable whose fingerprint the test sets, as the
// Windows volume list or the Linux mountinfo would change.
type fakeMountTable struct {
	fp    atomic.Uint64
	polls atomic.Int64 // fingerprint calls
}

var _ mountTable = (*fakeMountTable)(nil)

func (f *fakeMountTable) fingerprint() uint64 { f.polls.Add(1); return f.fp.Load() }

// scanVolume is an ext4 volume on partition sdb1 at byte offset off of
// disk sdb, as discovery reports a hardware RAID volume (no striped layer
// visible); off nil: the partition's offset could not be read.
func scanVolume(mount string, off *uint64) *plumblinev1.Volume {
	return &plumblinev1.Volume{MountPoint: mount, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: proto.Uint64(0)},
			{Kind: "partition", Device: "sdb1", OffsetBytes: off, LogicalSectorBytes: 512},
			{Kind: "disk", Device: "sdb", LogicalSectorBytes: 512, PhysicalSectorBytes: 4096, OffsetBytes: proto.Uint64(0)},
		}}
}

// A stripe-scan target carries where the volume lies on its disk, from
// discovery; a new placement is a new timer, while the latency kinds of
// the same schedule keep theirs.
func TestTargetsForStripeScan(t *testing.T) {
	s := []config.ProbeSchedule{{MountPoint: "/data*", Dir: "/data1/p", Kinds: []probe.Kind{probe.RandomRead, probe.StripeScan}}}
	byKind := func(v *plumblinev1.Volume) map[probe.Kind]target {
		out := map[probe.Kind]target{}
		for _, tg := range targetsFor([]*plumblinev1.Volume{v}, s) {
			out[tg.kind] = tg
		}
		if len(out) != 2 {
			t.Fatalf("targetsFor = %+v, want random-read and stripe-scan", out)
		}
		return out
	}
	mib := byKind(scanVolume("/data1", proto.Uint64(1<<20)))
	if got, want := mib[probe.StripeScan].placement, (probe.Placement{Offset: 1 << 20, Known: true, Device: "sdb", Basis: "disk"}); got != want {
		t.Errorf("stripe-scan placement = %+v, want %+v", got, want)
	}
	if got := mib[probe.RandomRead].placement; got != (probe.Placement{}) {
		t.Errorf("random-read placement = %+v, want none", got)
	}
	moved := byKind(scanVolume("/data1", proto.Uint64(63*512)))
	if moved[probe.StripeScan].placement.Offset != 63*512 || moved[probe.StripeScan].key() == mib[probe.StripeScan].key() {
		t.Errorf("partition moved to sector 63: stripe-scan placement %+v, key changed %v; want offset 32256, a new key",
			moved[probe.StripeScan].placement, moved[probe.StripeScan].key() != mib[probe.StripeScan].key())
	}
	if moved[probe.RandomRead].key() != mib[probe.RandomRead].key() {
		t.Error("random-read's key changed with the placement: its timer would restart")
	}
	if pl := byKind(scanVolume("/data1", nil))[probe.StripeScan].placement; pl.Known || pl.Why == "" {
		t.Errorf("unknown partition offset: placement %+v, want not known, with a reason", pl)
	}
}

// scanProber answers every run like fakeProber and, for a stripe-scan,
// records the placement it was given and reports it back as the engine
// does.
type scanProber struct {
	fakeProber
	mu         sync.Mutex
	placements []probe.Placement
}

func (p *scanProber) run(ctx context.Context, o probe.Options) (probe.Result, error) {
	res, err := p.fakeProber.run(ctx, o)
	if o.Kind != probe.StripeScan {
		return res, err
	}
	p.mu.Lock()
	p.placements = append(p.placements, o.Placement)
	p.mu.Unlock()
	res.StripeScan = &probe.StripeScanResult{Placement: o.Placement, Placed: o.Ops, Extents: 1}
	res.StripeScan.Unit, res.StripeScan.Confidence = 64<<10, 0.999
	return res, err
}

// A scheduled stripe-scan run is given the volume's placement from
// discovery and its answer reaches the server through the spool; when
// the partition moves, its timer restarts with the new placement, and
// the latency kind of the same schedule keeps its timer (runs hourly:
// one run each, whatever the timing).
func TestScheduledStripeScan(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes[0].Kinds = []probe.Kind{probe.RandomRead, probe.StripeScan}
	c.Probes[0].Every, c.Probes[0].FileSize = time.Hour, 16<<20
	var off atomic.Uint64
	off.Store(1 << 20)
	discover := func(context.Context) (Discovery, error) {
		inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"},
			Volumes: []*plumblinev1.Volume{scanVolume("/data1", proto.Uint64(off.Load()))}}
		return Discovery{Inventory: inv}, nil
	}
	prober := &scanProber{}
	a := newTestAgent(t, c, p, prober.run, discover)
	mt := &fakeMountTable{}
	mt.fp.Store(1)
	a.mounts = mt
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	results := func() (scans []*plumblinev1.StripeScan, reads int) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, q := range srv.order {
			switch pr := srv.stored[q].GetProbe(); pr.GetKind() {
			case string(probe.StripeScan):
				scans = append(scans, pr.GetStripeScan())
			case string(probe.RandomRead):
				reads++
			}
		}
		return scans, reads
	}
	waitFor(t, "the first stripe-scan result and random-read result", func() bool { s, r := results(); return len(s) == 1 && r == 1 })
	off.Store(63 * 512)
	mt.fp.Store(2) // the mount table changed: discovery again
	waitFor(t, "a stripe-scan result with the new placement", func() bool { s, _ := results(); return len(s) == 2 })
	cancel()
	<-done

	scans, reads := results()
	for i, want := range []uint64{1 << 20, 63 * 512} {
		s := scans[i]
		if s.GetPlacementOffsetBytes() != want || !s.GetPlacementOffsetKnown() || s.GetPlacementDevice() != "sdb" || s.GetPlacementBasis() != "disk" ||
			s.GetInferredStripeUnitBytes() != 64<<10 || s.GetPlaced() != 10 {
			t.Errorf("stripe-scan result %d = %v, want placed on sdb at %d, 64 KiB inferred", i, s, want)
		}
	}
	if reads != 1 {
		t.Errorf("random-read results = %d, want 1: the new placement restarted the latency kind's hourly timer", reads)
	}
	prober.mu.Lock()
	defer prober.mu.Unlock()
	if len(prober.placements) != 2 || prober.placements[0].Offset != 1<<20 || prober.placements[1].Offset != 63*512 {
		t.Errorf("placements given to the engine = %+v", prober.placements)
	}
}
