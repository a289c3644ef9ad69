package ingest

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/exporter"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// refusedProbe is what the agent reports for a run that the free-space floor
// refused: no operations, skipped, stopped_reason refused, the message.
func refusedProbe(seq uint64, at time.Time) *plumblinev1.Record {
	return &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(at), Payload: &plumblinev1.Record_Probe{Probe: &plumblinev1.ProbeResult{
		MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1,
		Duration: durationpb.New(0), StartedAt: timestamppb.New(at), Latency: wire.HistogramToProto(nil),
		ProbeFile: "/data/.plumbline-probe", ProbeFileSizeBytes: 1 << 30, OpsBudget: 1000, IopsCap: 100, BusyGuard: "off",
		Skipped: true, StoppedReason: "refused",
		Failure: "not enough free space in /data: writing the 1073741824-byte probe file would leave 0 bytes free",
	}}}
}

// failingSeries returns the plumbline_probe_failing_since_timestamp_seconds
// series of /data by reason, and the /data stop counts by reason.
func failingSeries(t *testing.T, c *exporter.Collector) (since, stops map[string]float64) {
	t.Helper()
	mfs, err := c.Gather()
	if err != nil {
		t.Fatal(err)
	}
	since, stops = map[string]float64{}, map[string]float64{}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if label(m, "mount_point") != "/data" {
				continue
			}
			switch mf.GetName() {
			case "plumbline_probe_failing_since_timestamp_seconds":
				since[label(m, "kind")+" "+label(m, "reason")] = m.GetGauge().GetValue()
			case "plumbline_probe_stops_total":
				stops[label(m, "reason")] = m.GetCounter().GetValue()
			}
		}
	}
	return since, stops
}

// TestRefusedRunReachesMetrics: a refused probe run sent over gRPC with
// mutual TLS is stored with its reason and message, counted as a stop, and
// makes the volume failing (the series PlumblineProbeFailing reads) until a
// run does I/O again.
func TestRefusedRunReachesMetrics(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		t1, t2 := testNow.Add(-2*time.Hour), testNow.Add(-time.Hour)
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{
			geometryRecord(1, misalignedVolume("/data")), refusedProbe(2, t1), refusedProbe(3, t2)}})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if len(rep.GetRejections()) != 0 || rep.GetHighWaterSequence() != 3 {
			t.Fatalf("Report() = %v, want all three stored", rep)
		}
		rows := dbRows(t, dsn, `SELECT stopped_reason, skipped, ops, failure FROM probe_results WHERE agent_id = ? ORDER BY sequence`, "db1")
		if len(rows) != 2 || rows[0][0] != "refused" || rows[0][2] != "0" || !strings.Contains(rows[0][3], "not enough free space in /data") {
			t.Errorf("stored probe rows = %q, want two refused runs with the message", rows)
		}

		ev, err := evaluator.New(e.store, evaluator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col, err := exporter.New(e.store, exporter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev.Pass(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		since, stops := failingSeries(t, col)
		if want := float64(t1.Unix()); len(since) != 1 || since["random-read refused"] != want {
			t.Errorf("failing since = %v, want {random-read refused: %v} (the first refused run)", since, want)
		}
		if stops["refused"] != 2 {
			t.Errorf("stops = %v, want refused 2", stops)
		}

		// A run that does I/O ends the streak.
		done := probeRecord(4)
		done.GetProbe().QueueDepth = 1
		h := &histogram.Histogram{}
		for range 100 {
			h.Observe(200 * time.Microsecond)
		}
		done.GetProbe().Latency = wire.HistogramToProto(h)
		if rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{done}}); err != nil || len(rep.GetRejections()) != 0 {
			t.Fatalf("Report(completed run) = %v, %v", rep, err)
		}
		if _, err := ev.Pass(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		col.Invalidate()
		if since, stops := failingSeries(t, col); len(since) != 0 || stops["refused"] != 2 {
			t.Errorf("after a completed run: failing since = %v (want none), stops = %v (want refused 2)", since, stops)
		}
	})
}

// TestNotRunValidation: the failure message and the not-run reasons are
// checked like every other field.
func TestNotRunValidation(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	c := e.agent(t, "db1")
	hello(t, c, "db1")
	tests := []struct {
		name string
		mod  func(*plumblinev1.ProbeResult)
		want string
	}{
		{"failure on a completed run", func(p *plumblinev1.ProbeResult) { p.StoppedReason, p.Skipped = "", false }, "failure set with stopped_reason"},
		{"refused with operations", func(p *plumblinev1.ProbeResult) { p.Ops, p.Skipped = 1, false }, "never started"},
		{"failure too long", func(p *plumblinev1.ProbeResult) { p.Failure = strings.Repeat("x", 1025) }, "at most 1024"},
		{"failure with an escape", func(p *plumblinev1.ProbeResult) { p.Failure = "\x1b[2J" }, "control character"},
		{"unknown reason", func(p *plumblinev1.ProbeResult) { p.StoppedReason = "nope" }, `stopped_reason "nope"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := refusedProbe(uint64(i+1), testNow)
			tt.mod(r.GetProbe())
			rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{r}})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.GetRejections()) != 1 || !strings.Contains(rep.GetRejections()[0].GetReason(), tt.want) {
				t.Errorf("Report() = %v, want one rejection saying %q", rep, tt.want)
			}
		})
	}
}
