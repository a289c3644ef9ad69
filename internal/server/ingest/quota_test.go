package ingest

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// quotaDetails are the reason and retry delay of a quota refusal.
func quotaDetails(t *testing.T, err error) (string, time.Duration) {
	t.Helper()
	var reason string
	var retry time.Duration
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		}
	}
	return reason, retry
}

// badRecords are n records each rejected (a mount point longer than
// MaxStringBytes: 4 KiB the server does not keep).
func badRecords(from uint64, n int) []*plumblinev1.Record {
	var out []*plumblinev1.Record
	for seq := from; seq < from+uint64(n); seq++ {
		r := probeRecord(seq)
		r.GetProbe().MountPoint = "/" + strings.Repeat("x", 4200)
		out = append(out, r)
	}
	return out
}

// One identity sending nothing but rejected records cannot grow the
// database past its storage quota (it grew 31-36 MB/s): each rejected
// record is stored as a sequence and a short reason, the day's cost is
// bounded, and the batch past it is refused with ResourceExhausted
// (STORAGE_QUOTA_EXCEEDED, retry at the next UTC day), counted for the
// agent, and not acknowledged (the agent keeps it). Both engines.
func TestStorageQuota(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		const quota = 256 << 10
		e := startServer(t, dsn, newPKI(t), Options{Quota: Quota{MaxBytesPerDay: quota, RecordsPerSecond: -1}})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		var refused error
		var seq uint64 = 1
		for i := 0; i < 100 && refused == nil; i++ {
			resp, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: badRecords(seq, 100)})
			if err != nil {
				refused = err
				break
			}
			if len(resp.GetRejections()) != 100 {
				t.Fatalf("%d rejections, want 100", len(resp.GetRejections()))
			}
			seq += 100
		}
		if refused == nil {
			t.Fatalf("%d rejected records of 4 KiB accepted: want a refusal past the %d-byte quota", seq-1, quota)
		}
		wantCode(t, "Report past the quota", refused, codes.ResourceExhausted, "storage quota")
		if reason, retry := quotaDetails(t, refused); reason != ReasonStorageQuota || retry <= 0 || retry > 24*time.Hour {
			t.Errorf("refusal details: reason %q, retry %s; want %s and a delay to the next UTC day", reason, retry, ReasonStorageQuota)
		}
		rows := dbRows(t, dsn, `SELECT COUNT(*), COALESCE(SUM(LENGTH(payload) + LENGTH(reason)), 0), MAX(agent_sequence) FROM records WHERE agent_id = ?`, "db1")
		n, _ := strconv.ParseInt(rows[0][0], 10, 64)
		size, _ := strconv.ParseInt(rows[0][1], 10, 64)
		if cost := size + n*store.RowCost; cost > quota || n == 0 {
			t.Errorf("%d records stored costing %d bytes: want some, within the quota of %d", n, cost, quota)
		}
		if hw := rows[0][2]; hw != strconv.FormatUint(seq-1, 10) {
			t.Errorf("highest stored sequence %s, want %d (the refused batch is not stored)", hw, seq-1)
		}
		hosts, err := e.store.ListHosts(ctxT(t))
		if err != nil || len(hosts) != 1 {
			t.Fatal(hosts, err)
		}
		if h := hosts[0]; h.QuotaRefusals != 1 || h.RecordsRejected != uint64(n) || h.StoredBytesOn(time.Now()) == 0 || h.StoredBytesOn(time.Now()) > quota {
			t.Errorf("agent counts: %d quota refusals, %d rejected, %d bytes today; want 1, %d, 1 to %d", h.QuotaRefusals, h.RecordsRejected, h.StoredBytesOn(time.Now()), n, quota)
		}
	})
}

// The record-rate quota refuses a batch beyond the agent's bucket with
// ResourceExhausted (RECORD_RATE_QUOTA_EXCEEDED and the time until it
// fits), counts it, and another agent is not affected.
func TestRecordRateQuota(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var later atomic.Int64 // the clock's advance
	clock := func() time.Time { return start.Add(time.Duration(later.Load())) }
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Quota: Quota{RecordsPerSecond: 10, RecordBurst: 1000}, Now: clock})
	c1, c2 := e.agent(t, "db1"), e.agent(t, "db2")
	hello(t, c1, "db1")
	hello(t, c2, "db2")
	if _, err := c1.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1, 1000)}); err != nil {
		t.Fatalf("a first batch of 1000 (the burst): %v", err)
	}
	_, err := c1.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1001, 1050)})
	wantCode(t, "a second batch at once", err, codes.ResourceExhausted, "record-rate quota")
	if reason, retry := quotaDetails(t, err); reason != ReasonRecordRateQuota || retry < 4*time.Second || retry > 6*time.Second {
		t.Errorf("refusal details: reason %q, retry %s; want %s, 5s (50 records at 10/s)", reason, retry, ReasonRecordRateQuota)
	}
	if _, err := c2.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db2", Records: probeRecords(1, 50)}); err != nil {
		t.Errorf("another agent's batch: %v", err)
	}
	later.Store(int64(5 * time.Second))
	if _, err := c1.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1001, 1050)}); err != nil {
		t.Errorf("the batch again after the delay: %v", err)
	}
	hosts, err := e.store.ListHosts(ctxT(t))
	if err != nil || len(hosts) != 2 || hosts[0].QuotaRefusals != 1 || hosts[1].QuotaRefusals != 0 {
		t.Fatalf("hosts %+v, %v: want one refusal for db1", hosts, err)
	}
}
