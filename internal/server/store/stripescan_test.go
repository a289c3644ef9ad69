package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

func scanRecord(seq uint64, mount string, started time.Time, scan []byte) Record {
	r := probeRecord(seq)
	r.Probe.MountPoint, r.Probe.Kind, r.Probe.QueueDepth, r.Probe.StartedAt = mount, "stripe-scan", 1, started
	r.Probe.StripeScan = scan
	return r
}

// A volume's stripe-scan runs come back newest first, at most
// MaxStripeScanRuns of them, and only runs that carry an answer; other
// kinds' rows have none (NULL).
func TestStripeScanRuns(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		var recs []Record
		for i := range MaxStripeScanRuns + 4 {
			recs = append(recs, scanRecord(uint64(i+1), "/data", t0.Add(time.Duration(i)*time.Hour), []byte(fmt.Sprintf("scan %d", i))))
		}
		recs = append(recs, scanRecord(100, "/logs", t0, []byte("logs")))
		skipped := scanRecord(101, "/logs", t0.Add(time.Hour), nil) // a refused run: no answer
		skipped.Probe.Skipped, skipped.Probe.Ops = true, 0
		recs = append(recs, skipped, probeRecord(102))
		if _, err := s.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		runs, err := s.StripeScanRuns(ctx, "a1", "")
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || len(runs["/data"]) != MaxStripeScanRuns || len(runs["/logs"]) != 1 {
			t.Fatalf("StripeScanRuns = %d volumes, /data %d runs, /logs %d; want 2, %d, 1", len(runs), len(runs["/data"]), len(runs["/logs"]), MaxStripeScanRuns)
		}
		d := runs["/data"]
		if want := fmt.Sprintf("scan %d", MaxStripeScanRuns+3); string(d[0].Scan) != want || d[0].Sequence != MaxStripeScanRuns+4 {
			t.Errorf("newest /data run = %q (sequence %d), want %q", d[0].Scan, d[0].Sequence, want)
		}
		if !slices.IsSortedFunc(d, func(a, b StripeScanRun) int { return b.StartedAt.Compare(a.StartedAt) }) {
			t.Error("/data runs not newest first")
		}
		one, err := s.StripeScanRuns(ctx, "a1", "/logs")
		if err != nil || len(one) != 1 || !bytes.Equal(one["/logs"][0].Scan, []byte("logs")) {
			t.Errorf("StripeScanRuns(/logs) = %v, %v", one, err)
		}
		var nulls int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM probe_results WHERE stripe_scan IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
			t.Errorf("rows without an answer = %d, %v; want 2 (the skipped run and the random-read)", nulls, err)
		}
	})
}

// Migration 00018 takes the probe kinds' CHECK away (ingest validates them
// from vocab) and keeps every row; down restores it, dropping the runs of
// kinds the old schema cannot hold.
func TestMigrationProbeKinds(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 17); err != nil {
			t.Fatalf("down to 17: %v", err)
		}
		if _, err := s.AppendBatch(ctx, "a1", []Record{scanRecord(1, "/data", time.Now(), nil)}); err == nil {
			t.Error("schema 17 stored a stripe-scan run: want the kind CHECK to refuse it")
		}
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO records (agent_id, sequence, incarnation, agent_sequence, kind, produced_ns, received_ns, payload, reason)
VALUES ('a1', 2, '', 2, 'probe', 1, 1, ?, '')`), []byte("r")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO probe_results (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, failure, latency_histogram, iops_cap)
VALUES ('a1', 2, '/data', 'sdb', 'log-write', 4096, 1, 5, 6, 7, 0, 8, FALSE, '', '', ?, 50)`), []byte("hist")); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up: %v", err)
		}
		var kind string
		var ops int64
		var iops float64
		if err := s.db.QueryRowContext(ctx, `SELECT kind, ops, iops_cap FROM probe_results WHERE sequence = 2`).Scan(&kind, &ops, &iops); err != nil || kind != "log-write" || ops != 7 || iops != 50 {
			t.Errorf("row kept by the upgrade = %s, %d ops, cap %v, %v", kind, ops, iops, err)
		}
		if _, err := s.AppendBatch(ctx, "a1", []Record{scanRecord(3, "/data", time.Now(), []byte("x"))}); err != nil {
			t.Errorf("schema 18 refused a stripe-scan run: %v", err)
		}
		if _, err := p.DownTo(ctx, 17); err != nil {
			t.Fatalf("down to 17 again: %v", err)
		}
		if n := count(t, s, "probe_results"); n != 1 {
			t.Errorf("rows after the downgrade = %d, want 1 (the stripe-scan run dropped)", n)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up again: %v", err)
		}
	})
}
