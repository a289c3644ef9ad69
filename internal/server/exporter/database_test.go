package exporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
)

// A volume holding database files gets, per source and op, its rate and
// its latency — or, for an op the database does not time, the
// not-measured gauge and no latency (never a 0) — and while an op is
// degraded its regression ratio with the attribution; a volume without a
// database gets none of them.
func TestDatabaseSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	seed(t, st, goldenFleet())
	var recs []store.Record
	for i := range 24 {
		lat := 500 * time.Microsecond
		if i >= 20 {
			lat *= 3
		}
		start := epoch.Add(time.Duration(i-24) * time.Minute)
		recs = append(recs, store.Record{Sequence: uint64(100 + i), Kind: store.KindDatabase, ProducedAt: start, Database: &store.DatabaseIO{
			Source: "main", Engine: "postgresql", StartedAt: start, Interval: time.Minute, Ops: []store.DatabaseOp{
				{Location: "data", Path: "/srv/pg/15", MountPoint: "/srv/pg", Device: "md0", Op: "read", Count: 600, Measured: true, Time: 600 * lat},
				{Location: "wal", Path: "/srv/pg/15/pg_wal", MountPoint: "/srv/pg", Device: "md0", Op: "wal-sync", Count: 120, NotMeasured: "track_wal_io_timing is off"},
			}}})
	}
	if _, err := st.AppendBatch(ctx, "db02", recs); err != nil {
		t.Fatal(err)
	}
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	text := scrape(t, c)
	const vol = `agent_id="db02",host="db02.example.com",mount_point="/srv/pg"`
	for _, want := range []string{
		`plumbline_database_latency_seconds{` + vol + `,op="read",source="main"} 0.0015`,
		`plumbline_database_operations_per_second{` + vol + `,op="read",source="main"} 10`,
		`plumbline_database_operations_per_second{` + vol + `,op="wal-sync",source="main"} 2`,
		`plumbline_database_not_measured{` + vol + `,op="wal-sync",source="main"} 1`,
		`plumbline_database_regression_ratio{agent_id="db02",attribution="undetermined",host="db02.example.com",mount_point="/srv/pg",op="read",source="main"} 3`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("exposition lacks %s", want)
		}
	}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "plumbline_database_") {
			n++
			if !strings.Contains(line, `agent_id="db02"`) || !strings.Contains(line, `mount_point="/srv/pg"`) {
				t.Errorf("a database series on a volume without a database: %s", line)
			}
			if strings.Contains(line, `op="wal-sync"`) && strings.HasPrefix(line, "plumbline_database_latency_seconds") {
				t.Errorf("a latency for an op not measured: %s", line)
			}
		}
	}
	if n != 5 { // 2 ops × (rate + latency or not measured) + 1 regression
		t.Errorf("%d database series, want 5", n)
	}
}
