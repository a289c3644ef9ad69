package ingest

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/exporter"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// demoted is the rules with the partition-offset rule demoted to a
// warning: a misaligned partition no longer makes a volume misaligned.
var demoted = Rules{Overrides: align.Overrides{Severity: map[string]string{align.RulePartitionOffsetStripeUnit: align.Warning}}}

// TestJudgePass: volumes whose records were judged under older rules
// (here: a record from before the judge kept versions, with the split
// figure before it was reported by cause, and a vacuous "aligned") are
// judged again by a pass, though their agents send no new snapshot; a
// second pass changes nothing; a geometry that does not decode is left as
// it is; new rules judge every record again.
func TestJudgePass(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.UpsertAgent(ctx, store.Agent{ID: "db1", Hostname: "db1.example", OS: "linux"}); err != nil {
			t.Fatal(err)
		}
		off := func(v uint64) *uint64 { return &v }
		// ext4, 4 KiB blocks, 1 MiB partition on a declared 64 KiB raid10:
		// the old rules stored the grid's share as the split (6.25% / 93.75%).
		data := &plumblinev1.Volume{MountPoint: "/data", Device: "/dev/sdb1",
			Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
			Layers: []*plumblinev1.Layer{
				{Kind: "filesystem", Device: "/dev/sdb1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0)},
				{Kind: "partition", Device: "sdb1", OffsetBytes: off(1 << 20), LogicalSectorBytes: 512},
				{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2, Source: "declared", PhysicalSectorBytes: 512},
			},
			Alignment: &plumblinev1.Alignment{Verdict: "aligned", DataOffsetBytes: off(1 << 20), StripeUnitBytes: 64 << 10,
				SplitFraction: map[uint32]float64{8192: 0.0625, 65536: 0.9375}},
		}
		// No physical sector, no stripe unit: stored as a vacuous "aligned".
		logv := &plumblinev1.Volume{MountPoint: "/log", Device: "/dev/sdc1",
			Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
			Layers: []*plumblinev1.Layer{
				{Kind: "filesystem", Device: "/dev/sdc1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0)},
				{Kind: "partition", Device: "sdc1", OffsetBytes: off(63 * 512)},
				{Kind: "disk", Device: "sdc"},
			},
			Alignment: &plumblinev1.Alignment{Verdict: "aligned", DiskOffsetBytes: off(63 * 512)},
		}
		// As the server stored them before: the alignment in the geometry,
		// a record of no rules version.
		old := func(v *plumblinev1.Volume) store.Volume {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return store.Volume{MountPoint: v.MountPoint, Device: v.Device, FSType: "ext4", Geometry: b,
				Judged: store.InventoryVolume{Verdict: v.Alignment.Verdict, Severity: "none",
					SplitFraction: [2]float64{v.Alignment.SplitFraction[8192], v.Alignment.SplitFraction[65536]}}}
		}
		bad := store.Volume{MountPoint: "/bad", Device: "/dev/sdd1", FSType: "ext4", Geometry: []byte{0xff, 0xff, 0xff},
			Judged: store.InventoryVolume{Verdict: "aligned", Severity: "none"}}
		rec := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: time.Unix(1_700_000_000, 0).UTC(), Payload: []byte("g"),
			Volumes: []store.Volume{old(data), old(logv), bad}}
		if _, err := st.AppendBatch(ctx, "db1", []store.Record{rec}); err != nil {
			t.Fatal(err)
		}
		j, err := NewJudge(st, JudgeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if changed, failed, err := j.Pass(ctx); err != nil || changed != 2 || failed != 1 {
			t.Fatalf("Pass() = %d changed, %d failed, %v; want 2, 1, nil", changed, failed, err)
		}
		row := func(mp string) *store.InventoryVolume {
			t.Helper()
			iv, err := st.InventoryVolumeByID(ctx, store.VolumeID("db1", mp))
			if err != nil {
				t.Fatal(err)
			}
			return iv
		}
		if d := row("/data"); d.Verdict != "aligned" || d.SplitFraction != [2]float64{0, 0} ||
			d.GranularitySplit != [2]float64{0.0625, 0.9375} || d.RulesVersion != (Rules{}).Version() {
			t.Errorf("/data after the pass = verdict %s split %v granularity %v rules %q; want aligned, 0 (the offset's share), the grid's share, %q",
				d.Verdict, d.SplitFraction, d.GranularitySplit, d.RulesVersion, Rules{}.Version())
		}
		if l := row("/log"); l.Verdict != "unknown" {
			t.Errorf("/log after the pass = %s, want unknown (no physical sector, no stripe unit)", l.Verdict)
		}
		if b := row("/bad"); b.Verdict != "aligned" || b.RulesVersion != "" {
			t.Errorf("/bad after the pass = %s %q, want it left as stored", b.Verdict, b.RulesVersion)
		}
		if changed, failed, err := j.Pass(ctx); err != nil || changed != 0 || failed != 1 {
			t.Errorf("second Pass() = %d changed, %d failed, %v; want 0, 1, nil", changed, failed, err)
		}
		if err := j.SetRules(demoted); err != nil {
			t.Fatal(err)
		}
		if changed, _, err := j.Pass(ctx); err != nil || changed != 2 {
			t.Errorf("Pass() under new rules = %d changed, %v; want 2", changed, err)
		}
		if d := row("/data"); d.RulesVersion != demoted.Version() || d.RulesVersion == (Rules{}).Version() {
			t.Errorf("/data under new rules: version %q, want %q (not the shipped one's)", d.RulesVersion, demoted.Version())
		}
	})
}

// TestSetRulesRefusesUnknown: an override of a rule or severity that does
// not exist is an error, and the rules in force stay.
func TestSetRulesRefusesUnknown(t *testing.T) {
	t.Parallel()
	j, err := NewJudge(nil, JudgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Rules{
		{Overrides: align.Overrides{Severity: map[string]string{"no-such-rule": align.Critical}}},
		{Overrides: align.Overrides{Severity: map[string]string{align.RuleOffsetUnknown: "dire"}}},
	} {
		if err := j.SetRules(r); err == nil {
			t.Errorf("SetRules(%v) accepted", r.Overrides)
		}
	}
	if v := j.Rules().Version(); v != (Rules{}).Version() {
		t.Errorf("rules in force after refused changes: %q", v)
	}
}

// TestRulesChangeInRunningServer: in a running server (real gRPC over
// TLS, a real store) a volume judged misaligned under the shipped rules
// follows a rule change made in the running process (Judge.SetRules, what
// a configuration reload calls): its API row, its page document and the
// /metrics verdict series, without a restart and without a new snapshot.
func TestRulesChangeInRunningServer(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			env := startServer(t, e.DSN(t), newPKI(t), Options{})
			ctx, cancel := context.WithCancel(context.Background())
			var loop sync.WaitGroup
			loop.Go(func() { env.svc.judge.Run(ctx) })
			t.Cleanup(func() { cancel(); loop.Wait() })
			c := env.agent(t, "db1")
			hello(t, c, "db1")
			if _, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"))}}); err != nil {
				t.Fatal(err)
			}
			metrics, err := exporter.New(env.store, exporter.Options{MaxAge: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			id := store.VolumeID("db1", "/data")
			if got := judgedVerdicts(t, env.store, metrics, id); got != [3]string{"misaligned", "misaligned", "misaligned"} {
				t.Fatalf("under the shipped rules: row, document, /metrics = %v; want misaligned", got)
			}
			if err := env.svc.judge.SetRules(demoted); err != nil {
				t.Fatal(err)
			}
			var got [3]string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if got = judgedVerdicts(t, env.store, metrics, id); got == [3]string{"aligned", "aligned", "aligned"} {
					return
				}
			}
			t.Errorf("after the rule change: row, document, /metrics = %v; want aligned", got)
		})
	}
}

// judgedVerdicts are a volume's verdict in its API row, its page document
// and the /metrics volume_info series.
func judgedVerdicts(t *testing.T, st *store.Store, metrics *exporter.Collector, id string) [3]string {
	t.Helper()
	iv, err := st.InventoryVolumeByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out [3]string
	out[0] = iv.Verdict
	err = st.QueryVolumes(context.Background(), store.VolumeQuery{WithDoc: true}, func(v *store.InventoryVolume) error {
		if v.ID == id {
			for _, w := range []string{"aligned", "misaligned", "unknown"} {
				if strings.Contains(string(v.Doc), fmt.Sprintf(`"verdict":%q`, w)) {
					out[1] = w
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "plumbline_volume_info{") || !strings.Contains(line, `mount_point="/data"`) {
			continue
		}
		if i := strings.Index(line, `verdict="`); i >= 0 {
			out[2], _, _ = strings.Cut(line[i+len(`verdict="`):], `"`)
		}
	}
	return out
}

// BenchmarkJudgePass: the judge's pass over 2,000 stored volumes already
// judged under the rules in force (the common case: nothing to judge), on
// SQLite. Reported per pass.
func BenchmarkJudgePass(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+b.TempDir()+"/r.db")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const hosts, perHost = 500, 4
	for h := range hosts {
		id := fmt.Sprintf("db%04d", h)
		if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id, OS: "linux"}); err != nil {
			b.Fatal(err)
		}
		var vols []store.Volume
		for i := range perHost {
			sv, err := judgeVolume(misalignedVolume(fmt.Sprintf("/data%d", i)), nil, Rules{})
			if err != nil {
				b.Fatal(err)
			}
			vols = append(vols, sv)
		}
		rec := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: time.Unix(1_700_000_000, 0).UTC(), Payload: []byte("g"), Volumes: vols}
		if _, err := st.AppendBatch(ctx, id, []store.Record{rec}); err != nil {
			b.Fatal(err)
		}
	}
	j, err := NewJudge(st, JudgeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		changed, failed, err := j.Pass(ctx)
		if err != nil || changed != 0 || failed != 0 {
			b.Fatalf("Pass() = %d, %d, %v; want nothing to judge", changed, failed, err)
		}
	}
}
