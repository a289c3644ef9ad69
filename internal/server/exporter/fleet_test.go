package exporter

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/judgetest"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

// epoch is the fixed clock of the golden fleet.
var epoch = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func u64(v uint64) *uint64 { return &v }
func bp(v bool) *bool      { return &v }

func openStore(tb testing.TB) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(tb.TempDir(), "plumbline.db"))
	if err != nil {
		tb.Fatalf("store.Open: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func fsLayer(dev, typ string, block uint32) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "filesystem", Device: dev, FsType: typ, BlockSizeBytes: block, OffsetBytes: u64(0), Source: "superblock"}
}

func partLayer(dev string, offset uint64, below string) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "partition", Device: dev, OffsetBytes: u64(offset), LogicalSectorBytes: 512, PhysicalSectorBytes: 512,
		Below: []string{below}, Source: "sysfs"}
}

func diskLayer(dev, model string, rotational bool, physical uint32) *plumblinev1.Layer {
	return &plumblinev1.Layer{Kind: "disk", Device: dev, Model: model, Rotational: bp(rotational), LogicalSectorBytes: 512,
		PhysicalSectorBytes: physical, OffsetBytes: u64(0), Source: "sysfs"}
}

// hardwareRAID is the 31.5 KB legacy layout on a declared RAID 10 of 15K disks.
func legacyVolume(mount string) *plumblinev1.Volume {
	raid := &plumblinev1.Layer{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 * kib, RaidDisks: 4, RaidDataDisks: 2,
		LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared", Model: "SEAGATE ST300MP0005 15K SAS",
		Sources: map[string]string{"model": "declared", "raid_level": "declared", "stripe_unit_bytes": "declared"}}
	return &plumblinev1.Volume{MountPoint: mount, Device: "/dev/sdb1", Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4 * kib},
		Layers: []*plumblinev1.Layer{fsLayer("sdb1", "ext4", 4*kib), partLayer("sdb1", 63*512, "sdb"), raid}}
}

func nvmeVolume(mount string) *plumblinev1.Volume {
	return &plumblinev1.Volume{MountPoint: mount, Device: "/dev/nvme0n1p1", Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4 * kib},
		Layers: []*plumblinev1.Layer{fsLayer("nvme0n1p1", "xfs", 4*kib), partLayer("nvme0n1p1", mib, "nvme0n1"), diskLayer("nvme0n1", "Samsung SSD 980 PRO 1TB", false, 512)}}
}

// mdVolume is ext4 on an md RAID 10 of four SATA SSDs, one of them missing.
func mdVolume(mount string) *plumblinev1.Volume {
	md := &plumblinev1.Layer{Kind: "raid", Device: "md0", RaidLevel: "raid10", StripeUnitBytes: 512 * kib, RaidDisks: 4, RaidDataDisks: 2,
		RaidLayout: "near=2", LogicalSectorBytes: 512, PhysicalSectorBytes: 4096, OffsetBytes: u64(0), Below: []string{"sda", "sdb", "sdc"}, Source: "sysfs",
		Sources: map[string]string{"raid_level": "sysfs", "raid_disks": "sysfs", "stripe_unit_bytes": "sysfs"}}
	ls := []*plumblinev1.Layer{fsLayer("md0", "ext4", 4*kib), md}
	for _, d := range md.Below {
		ls = append(ls, diskLayer(d, "Samsung SSD 870 EVO 1TB", false, 4096))
	}
	// The geometry probe confirmed md0's 512 KiB unit and timed a split read.
	ms := &plumblinev1.StripeMeasurement{UnitBytes: 512 * kib, Confidence: 0.995, AgreeingRuns: 3, StraddleCostSeconds: 0.0004,
		StraddleCostLowSeconds: 0.0003, StraddleCostHighSeconds: 0.0005, Device: "md0", Basis: "striped device", OffsetKnown: true}
	return &plumblinev1.Volume{MountPoint: mount, Device: "/dev/md0", Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4 * kib},
		Layers: ls, MeasuredStripe: ms}
}

// storeVolume is what ingest stores for a volume (judgetest.Volume).
func storeVolume(tb testing.TB, v *plumblinev1.Volume) store.Volume { return judgetest.Volume(tb, v) }

// runHistogram is one run's latency: ops operations spread ±10% around
// median.
func runHistogram(tb testing.TB, median time.Duration, ops int) []byte {
	tb.Helper()
	var h histogram.Histogram
	for i := range ops {
		f := 0.9 + 0.2*float64(i)/float64(max(ops-1, 1))
		h.Observe(time.Duration(float64(median) * f))
	}
	b, err := proto.Marshal(wire.HistogramToProto(&h))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// run is one probe run of a fleet volume.
type run struct {
	mount, kind string
	at          time.Time
	median      time.Duration
	skipped     bool
	stopped     string
}

// host is one agent of a fleet with its volumes and runs.
type host struct {
	id, hostname string
	lastSeen     time.Time
	certIssued   time.Time // a 30-day client certificate's NotBefore (zero: none)
	volumes      []*plumblinev1.Volume
	runs         []run
}

// agent is the host as its Hello registers it.
func (h host) agent() store.Agent {
	a := store.Agent{ID: h.id, Hostname: h.hostname, OS: "linux", Kernel: "6.1.0", AgentVersion: "0.1.0", LastSeen: h.lastSeen}
	if !h.certIssued.IsZero() {
		a.CertNotBefore, a.CertNotAfter = h.certIssued, h.certIssued.Add(30*24*time.Hour)
	}
	return a
}

// seed stores the fleet through the store API, as ingest would, and lets
// one evaluator pass judge every run.
func seed(tb testing.TB, st *store.Store, fleet []host) {
	tb.Helper()
	ctx := context.Background()
	for _, h := range fleet {
		if err := st.UpsertAgent(ctx, h.agent()); err != nil {
			tb.Fatal(err)
		}
		var recs []store.Record
		if len(h.volumes) > 0 {
			g := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: h.lastSeen}
			for _, v := range h.volumes {
				g.Volumes = append(g.Volumes, storeVolume(tb, v))
			}
			recs = append(recs, g)
		}
		first := uint64(1)
		if len(h.volumes) > 0 {
			first = 2
		}
		for i, r := range h.runs {
			p := &store.ProbeResult{MountPoint: r.mount, Device: "sdx", Kind: r.kind, BlockSizeBytes: 8 * kib, QueueDepth: 1,
				StartedAt: r.at, Duration: 2 * time.Second, Skipped: r.skipped, StoppedReason: r.stopped}
			if r.stopped == "refused" || r.stopped == "failed" {
				p.Failure = "the agent's message"
			}
			if r.skipped {
				p.Histogram = runHistogram(tb, 0, 0)
			} else {
				p.Ops, p.Bytes, p.Histogram, p.IOPSCap = 100, 100*8*kib, runHistogram(tb, r.median, 100), 50
			}
			recs = append(recs, store.Record{Sequence: first + uint64(i), Kind: store.KindProbe, ProducedAt: r.at, Probe: p})
		}
		for len(recs) > 0 {
			n := min(len(recs), 500)
			if _, err := st.AppendBatch(ctx, h.id, recs[:n]); err != nil {
				tb.Fatal(err)
			}
			recs = recs[n:]
		}
		// AppendBatch moved last-seen to the wall clock; pin it back.
		if err := st.UpsertAgent(ctx, h.agent()); err != nil {
			tb.Fatal(err)
		}
	}
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := ev.Pass(ctx); err != nil {
		tb.Fatalf("evaluator pass: %v", err)
	}
}

// steady is n hourly runs of every kind on a volume, from start.
func steady(mount string, start time.Time, n int, medians map[string]time.Duration) []run {
	var out []run
	for i := range n {
		for _, k := range vocab.JudgedProbeKindNames() {
			out = append(out, run{mount: mount, kind: k, at: start.Add(time.Duration(i) * time.Hour), median: medians[k]})
		}
	}
	return out
}

// goldenFleet: a legacy-misaligned hardware RAID 10 whose random reads
// degraded, an aligned NVMe volume whose last random writes were refused, an md RAID 10 missing a member with a
// skipped and a stopped run, and an agent that went silent.
func goldenFleet() []host {
	hdd := map[string]time.Duration{"random-read": 6 * time.Millisecond, "random-write": 7 * time.Millisecond, "log-write": 2 * time.Millisecond}
	nvme := map[string]time.Duration{"random-read": 90 * time.Microsecond, "random-write": 30 * time.Microsecond, "log-write": 40 * time.Microsecond}
	ssd := map[string]time.Duration{"random-read": 180 * time.Microsecond, "random-write": 60 * time.Microsecond, "log-write": 500 * time.Microsecond}
	start := epoch.Add(-24 * time.Hour)

	db01 := steady("/data", start, 16, hdd)
	for i := 16; i < 21; i++ { // random reads step to 3× for five runs
		db01 = append(db01, run{mount: "/data", kind: "random-read", at: start.Add(time.Duration(i) * time.Hour), median: 18 * time.Millisecond})
	}
	db01 = append(db01, steady("/log", start, 14, nvme)...)
	for i := 14; i < 16; i++ { // then random writes refused (say, by the free-space floor)
		db01 = append(db01, run{mount: "/log", kind: "random-write", at: start.Add(time.Duration(i) * time.Hour), skipped: true, stopped: "refused"})
	}

	db02 := steady("/srv/pg", start, 13, ssd)
	db02 = append(db02,
		run{mount: "/srv/pg", kind: "random-read", at: start.Add(20 * time.Hour), skipped: true, stopped: "busy"},
		run{mount: "/srv/pg", kind: "log-write", at: start.Add(21 * time.Hour), median: 600 * time.Microsecond, stopped: "latency-ceiling"})

	return []host{
		{id: "db01", hostname: "db01.example.com", lastSeen: epoch.Add(-30 * time.Second), certIssued: epoch.Add(-25 * 24 * time.Hour), volumes: []*plumblinev1.Volume{legacyVolume("/data"), nvmeVolume("/log")}, runs: db01},
		{id: "db02", hostname: "db02.example.com", lastSeen: epoch.Add(-time.Minute), volumes: []*plumblinev1.Volume{mdVolume("/srv/pg")}, runs: db02},
		{id: "db03", hostname: "db03.example.com", lastSeen: epoch.Add(-2 * time.Hour)},
	}
}

// evaluatorStatus wires an evaluator into Options as the server does.
func evaluatorStatus(ev *evaluator.Evaluator) func() EvaluatorStatus {
	return func() EvaluatorStatus {
		s := ev.Status()
		return EvaluatorStatus{LastSuccess: s.LastSuccess, Passes: s.Passes, Runs: s.Runs, Failures: s.Failures}
	}
}

func fixedOptions() Options {
	return Options{Now: func() time.Time { return epoch }}
}

func volumeID(host, mount string) string { return fmt.Sprintf("%s:%s", host, mount) }
