package ingest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func recovering() *plumblinev1.ArrayActivity {
	return &plumblinev1.ArrayActivity{Device: "md0", SyncAction: "recover", SyncCompletedSectors: 430, SyncTotalSectors: 1000, SyncSpeedBytesPerSecond: 50 << 20}
}

func TestCheckArrayActivity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		acts []*plumblinev1.ArrayActivity
		want string // "" accepted
	}{
		{"none", nil, ""},
		{"recover", []*plumblinev1.ArrayActivity{recovering()}, ""},
		{"check beside a reshape", []*plumblinev1.ArrayActivity{recovering(), {Device: "md1", SyncAction: "check"}}, ""},
		{"an action this version does not know", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "scrub-deep"}}, ""},
		{"idle", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "idle"}}, "want an action that runs"},
		{"frozen", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "frozen"}}, "want an action that runs"},
		{"no action", []*plumblinev1.ArrayActivity{{Device: "md0"}}, "sync_action"},
		{"upper case", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "Resync"}}, "sync_action"},
		{"not md", []*plumblinev1.ArrayActivity{{Device: "sdb", SyncAction: "resync"}}, "md array's kernel name"},
		{"a path", []*plumblinev1.ArrayActivity{{Device: "md0/../sda", SyncAction: "resync"}}, "md array's kernel name"},
		{"twice", []*plumblinev1.ArrayActivity{recovering(), recovering()}, "each once"},
		{"done beyond total", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "resync", SyncCompletedSectors: 2, SyncTotalSectors: 1}}, "2 sectors done of 1"},
		{"speed", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "resync", SyncSpeedBytesPerSecond: 1 << 41}}, "sync_speed_bytes_per_second"},
		{"too many", func() (a []*plumblinev1.ArrayActivity) {
			for i := range 17 {
				a = append(a, &plumblinev1.ArrayActivity{Device: fmt.Sprintf("md%d", i), SyncAction: "check"})
			}
			return a
		}(), "17 arrays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := probeResult()
			p.ArrayActivity = tc.acts
			if got := converted(t, p, tc.want); got != nil && len(got.ArrayActivity) != len(tc.acts) {
				t.Errorf("stored %d arrays, want %d", len(got.ArrayActivity), len(tc.acts))
			}
		})
	}
}

// A marked run sent over gRPC with mutual TLS is stored with its mark and
// read back by the evaluator's query; a run with a bad mark is refused
// alone; an unmarked run reads back without one.
func TestArrayActivityStored(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		marked, bad, plain := probeRecord(1), probeRecord(2), probeRecord(3)
		marked.GetProbe().ArrayActivity = []*plumblinev1.ArrayActivity{recovering(), {Device: "md1", SyncAction: "check", SyncTotalSectors: 8}}
		bad.GetProbe().ArrayActivity = []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "idle"}}
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{marked, bad, plain}})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if r := rep.GetRejections(); len(r) != 1 || r[0].GetSequence() != 2 || !strings.Contains(r[0].GetReason(), "array_activity") {
			t.Fatalf("rejections = %v, want sequence 2's mark alone", r)
		}
		runs, err := e.store.PendingProbeRuns(ctxT(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 {
			t.Fatalf("%d pending runs, want 2", len(runs))
		}
		want := []store.ArrayActivity{
			{Device: "md0", Action: "recover", DoneSectors: 430, TotalSectors: 1000, SpeedBytesPerSecond: 50 << 20},
			{Device: "md1", Action: "check", TotalSectors: 8},
		}
		if !reflect.DeepEqual(runs[0].ArrayActivity, want) {
			t.Errorf("marked run read back %+v, want %+v", runs[0].ArrayActivity, want)
		}
		if runs[1].ArrayActivity != nil {
			t.Errorf("plain run read back %+v, want no mark", runs[1].ArrayActivity)
		}
	})
}

// timedProbe is a random-read run at at whose 100 ops take about lat each.
func timedProbe(seq uint64, at time.Time, lat time.Duration) *plumblinev1.Record {
	r := probeRecord(seq)
	p := r.GetProbe()
	h := &histogram.Histogram{}
	for i := range 100 {
		h.Observe(lat + time.Duration(i)*lat/100)
	}
	p.StartedAt, p.Latency = timestamppb.New(at), wire.HistogramToProto(h)
	return r
}

// TestRebuildStateThroughIngest: an agent's runs over gRPC with mutual
// TLS — a steady history, then slow runs marked as made during md0's
// recovery — leave the volume's inventory row saying it is rebuilding and
// how far along, not degraded.
func TestRebuildStateThroughIngest(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		recs := []*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"))}
		start := testNow.Add(-2 * time.Hour)
		for i := range 24 {
			lat := time.Millisecond
			if i >= 16 {
				lat = 10 * time.Millisecond
			}
			r := timedProbe(uint64(i+2), start.Add(time.Duration(i)*3*time.Minute), lat)
			if i >= 16 {
				r.GetProbe().ArrayActivity = []*plumblinev1.ArrayActivity{recovering()}
			}
			recs = append(recs, r)
		}
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: recs})
		if err != nil || len(rep.GetRejections()) != 0 {
			t.Fatalf("Report() = %v, %v; want every record stored", rep, err)
		}
		ev, err := evaluator.New(e.store, evaluator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev.Pass(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		iv, err := e.store.InventoryVolumeByID(ctxT(t), store.VolumeID("db1", "/data"))
		if err != nil {
			t.Fatal(err)
		}
		want := "rebuilding, 43% done: md0 recover at 50.0 MiB/s"
		if b := iv.Baseline; b == nil || b.State != "rebuilding" || b.Degraded || !strings.HasPrefix(b.Reason, want) {
			t.Errorf("baseline state = %+v, want rebuilding, not degraded, reason %q…", b, want)
		}
	})
}

// converted converts p as ingest does: refused with want in the error, or
// (want "") accepted. It returns what would be stored (nil when refused).
func converted(t *testing.T, p *plumblinev1.ProbeResult, want string) *store.ProbeResult {
	t.Helper()
	got, err := convertProbe(p, testNow, Limits{}.withDefaults())
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("err = %v, want %q", err, want)
	case err != nil:
		return nil
	}
	return got
}
