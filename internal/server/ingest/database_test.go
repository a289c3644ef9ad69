package ingest

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func databaseIO() *plumblinev1.DatabaseIO {
	return &plumblinev1.DatabaseIO{
		Source: "main", Engine: "postgresql", Version: "15.8",
		StartedAt: timestamppb.New(testNow.Add(-2 * time.Minute)), Interval: durationpb.New(time.Minute),
		Sets: []*plumblinev1.DatabaseIOSet{
			{Location: "data", Path: "/srv/pg/15/main", MountPoint: "/data", Device: "md0", Ops: []*plumblinev1.DatabaseIOOp{
				{Op: "read", Count: 1000, Bytes: 1000 * 8192, TimeNanoseconds: u64(400e6)},
				{Op: "write", Count: 10, Bytes: 10 * 8192, TimeNanoseconds: u64(0)},
			}},
			{Location: "wal", Path: "/srv/pg/15/main/pg_wal", MountPoint: "/data", Device: "md0", Ops: []*plumblinev1.DatabaseIOOp{
				{Op: "wal-sync", Count: 300, NotMeasured: "track_wal_io_timing is off"},
			}},
			{Location: "tablespace", Path: "/nfs/ts1", Attribution: "/nfs is an nfs4 mount: no local volume", Ops: []*plumblinev1.DatabaseIOOp{
				{Op: "read", Count: 3, TimeNanoseconds: u64(3e6)},
			}},
		},
	}
}

func databaseRecord(seq uint64, mutate func(*plumblinev1.DatabaseIO)) *plumblinev1.Record {
	d := databaseIO()
	if mutate != nil {
		mutate(d)
	}
	return &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(testNow), Payload: &plumblinev1.Record_DatabaseIo{DatabaseIo: d}}
}

// A bad database interval is rejected alone, with a reason naming what is
// wrong; the good intervals of the same batch are stored, each operation
// a row, a time not taken stored as none (NULL), never 0.
func TestDatabaseIOIngest(t *testing.T) {
	t.Parallel()
	op := func(d *plumblinev1.DatabaseIO) *plumblinev1.DatabaseIOOp { return d.Sets[0].Ops[0] }
	bad := []struct {
		name, want string
		mutate     func(*plumblinev1.DatabaseIO)
	}{
		{"unknown engine", `engine "oracle"`, func(d *plumblinev1.DatabaseIO) { d.Engine = "oracle" }},
		{"no source", "source", func(d *plumblinev1.DatabaseIO) { d.Source = "" }},
		{"no interval", "interval missing", func(d *plumblinev1.DatabaseIO) { d.Interval = nil }},
		{"zero interval", "interval 0s", func(d *plumblinev1.DatabaseIO) { d.Interval = durationpb.New(0) }},
		{"future", "ahead of the server's clock", func(d *plumblinev1.DatabaseIO) { d.StartedAt = timestamppb.New(testNow.Add(48 * time.Hour)) }},
		{"unknown location", `location "heap"`, func(d *plumblinev1.DatabaseIO) { d.Sets[0].Location = "heap" }},
		{"unknown op", `op "vacuum"`, func(d *plumblinev1.DatabaseIO) { op(d).Op = "vacuum" }},
		{"op twice", "read twice", func(d *plumblinev1.DatabaseIO) { d.Sets[0].Ops[1].Op = "read" }},
		{"set twice", "twice", func(d *plumblinev1.DatabaseIO) { d.Sets = append(d.Sets, d.Sets[0]) }},
		{"unattributed without reason", "attribution", func(d *plumblinev1.DatabaseIO) { d.Sets[2].Attribution = "" }},
		{"relative mount point", "mount_point", func(d *plumblinev1.DatabaseIO) { d.Sets[0].MountPoint = "data" }},
		{"silent untimed op", "not_measured", func(d *plumblinev1.DatabaseIO) { op(d).TimeNanoseconds = nil }},
		{"time and not measured", "one or the other", func(d *plumblinev1.DatabaseIO) { op(d).NotMeasured = "off" }},
		{"time without ops", "for no operation", func(d *plumblinev1.DatabaseIO) { op(d).Count, op(d).Bytes = 0, 0 }},
		{"bytes without ops", "moved by no operation", func(d *plumblinev1.DatabaseIO) { op(d).Count, op(d).TimeNanoseconds = 0, u64(0) }},
		{"an hour an op", "an op", func(d *plumblinev1.DatabaseIO) { op(d).TimeNanoseconds = u64(1000 * uint64(2*time.Hour)) }},
		{"counter above int64", "2^63-1", func(d *plumblinev1.DatabaseIO) { op(d).Count = 1 << 63 }},
	}
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		recs := []*plumblinev1.Record{databaseRecord(1, nil)}
		for i, b := range bad {
			recs = append(recs, databaseRecord(uint64(i+2), b.mutate))
		}
		good := uint64(len(bad) + 2)
		recs = append(recs, databaseRecord(good, nil))
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: recs})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if rep.GetHighWaterSequence() != good || len(rep.GetRejections()) != len(bad) {
			t.Fatalf("Report() = high water %d, %d rejections; want %d, %d", rep.GetHighWaterSequence(), len(rep.GetRejections()), good, len(bad))
		}
		for i, r := range rep.GetRejections() {
			b := bad[i]
			if r.GetSequence() != uint64(i+2) || !strings.Contains(r.GetReason(), b.want) || !strings.HasPrefix(r.GetReason(), "database_io: ") {
				t.Errorf("%s: rejection %d %q; want sequence %d, a reason with %q", b.name, r.GetSequence(), r.GetReason(), i+2, b.want)
			}
		}
		rows := dbRows(t, dsn, `SELECT COUNT(*), COUNT(time_ns), SUM(CASE WHEN time_ns = 0 THEN 1 ELSE 0 END) FROM database_io WHERE agent_id = ?`, "db1")
		if got := strings.Join(rows[0], " "); got != "8 6 2" {
			t.Errorf("database_io rows, timed, timed 0 = %s; want 8 6 2 (two intervals of 4 ops, wal-sync not measured, a write of 0 ns)", got)
		}
	})
}
