package projection

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func u64(v uint64) *uint64 { return &v }

// volume is an XFS volume on a RAID 10 of 64 KiB stripe units, its
// partition at offset (32256: misaligned; 1 MiB: aligned).
func volume(mp, uuid string, offset uint64) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096, Uuid: uuid},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "xfs", BlockSizeBytes: 4096, OffsetBytes: u64(0)},
			{Kind: "partition", Device: "sdb1", OffsetBytes: u64(offset), LogicalSectorBytes: 512, PartitionTable: "gpt", PartitionNumber: 1},
			{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared"},
		},
		Alignment: &plumblinev1.Alignment{Verdict: "aligned"}, // the agent's claim; the server judges again
	}
}

// report stores one geometry snapshot of agent id through the server's own
// validation, into a real store.
func report(t *testing.T, st *store.Store, id, hostname string, seq uint64, vols ...*plumblinev1.Volume) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: hostname, OS: "linux"}); err != nil {
		t.Fatal(err)
	}
	req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
		Sequence: seq, ProducedAt: timestamppb.New(time.Now().Add(time.Duration(seq) * time.Millisecond)),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
	}}}
	b, err := ingest.ValidateReport(req, ingest.Limits{}, time.Now())
	if err != nil || len(b.Rejections) > 0 {
		t.Fatalf("ValidateReport: %v %v", err, b.Rejections)
	}
	if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
		t.Fatal(err)
	}
}

// rows are the inventory rows of the store, by mount point.
func rows(t *testing.T, st *store.Store) map[string]*store.InventoryVolume {
	t.Helper()
	out := map[string]*store.InventoryVolume{}
	err := st.QueryVolumes(context.Background(), store.VolumeQuery{WithDoc: true}, func(v *store.InventoryVolume) error {
		out[v.MountPoint] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openStore(t *testing.T, e pgtest.Engine) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), e.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSyncDerivesRows: a sync derives each volume's row (the server's
// verdict, RAID level, findings, the page document) and an incremental
// sync catches up a later snapshot: a changed volume is derived again, a
// gone one removed.
func TestSyncDerivesRows(t *testing.T) {
	t.Parallel()
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e)
			report(t, st, "a1", "db1.example", 1, volume("/data", "u1", 32256), volume("/logs", "u2", 1<<20))
			p := New(st, Options{})
			if p.Synced() {
				t.Fatal("synced before any sync")
			}
			// The first sync is full, even when asked for an incremental one.
			if err := p.Sync(ctx, false); err != nil {
				t.Fatal(err)
			}
			if !p.Synced() {
				t.Fatal("not synced after the first sync")
			}
			got := rows(t, st)
			if len(got) != 2 {
				t.Fatalf("%d rows after the first sync, want 2: %v", len(got), got)
			}
			data := got["/data"]
			logs := got["/logs"]
			if data.Verdict != "misaligned" || data.RAIDLevel != "raid10" || data.Hostname != "db1.example" ||
				data.DataOffsetBytes != 32256 || data.StripeUnitBytes != 64<<10 || data.SplitFraction[0] <= 0 || data.Severity != "critical" {
				t.Errorf("/data row: verdict %s raid %s host %s offset %d stripe unit %d split %v severity %s",
					data.Verdict, data.RAIDLevel, data.Hostname, data.DataOffsetBytes, data.StripeUnitBytes, data.SplitFraction[0], data.Severity)
			}
			if logs.Verdict != "aligned" || logs.DataOffsetBytes != 1<<20 || logs.SplitFraction[0] != 0 || logs.SeverityRank >= data.SeverityRank {
				t.Errorf("/logs row: verdict %s offset %d split %v severity %s", logs.Verdict, logs.DataOffsetBytes, logs.SplitFraction[0], logs.Severity)
			}
			var doc map[string]any
			if err := json.Unmarshal(data.Doc, &doc); err != nil {
				t.Fatalf("/data document: %v: %s", err, data.Doc)
			}
			if doc["id"] != data.ID || doc["raid_level"] != "raid10" || doc["host"] != "db1.example" || doc["severity"] != data.Severity {
				t.Errorf("/data document: %v", doc)
			}

			// /data realigned, /logs gone: the next incremental sync catches up.
			report(t, st, "a1", "db1.example", 2, volume("/data", "u1", 1<<20))
			if err := p.Sync(ctx, false); err != nil {
				t.Fatal(err)
			}
			got = rows(t, st)
			if len(got) != 1 || got["/data"] == nil || got["/data"].Verdict != "aligned" || got["/data"].Sequence != 2 {
				t.Errorf("after the second snapshot: %v", got)
			}
		})
	}
}

// TestHistory: consecutive snapshots of a host make the volume's geometry
// history — each tracked field that changed, with its kind — and a volume
// that appears or goes is recorded as such.
func TestHistory(t *testing.T) {
	t.Parallel()
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e)
			p := New(st, Options{})
			report(t, st, "a1", "db1.example", 1, volume("/data", "u1", 32256), volume("/logs", "u2", 1<<20))
			// Reformatted and repartitioned; /logs gone, /new appeared.
			report(t, st, "a1", "db1.example", 2, volume("/data", "u9", 1<<20), volume("/new", "u3", 1<<20))
			changes, err := p.History(ctx, "a1", "/data")
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]string{}
			for _, c := range changes {
				kinds[c.Field] = c.Kind
				if c.Sequence != 2 {
					t.Errorf("change %+v: sequence %d, want 2", c, c.Sequence)
				}
			}
			want := map[string]string{"filesystem.uuid": "reformat", "partition.offset_bytes": "new-partition",
				"alignment.data_offset_bytes": "offset-change", "alignment.verdict": "verdict-change"}
			for f, k := range want {
				if kinds[f] != k {
					t.Errorf("history of /data: field %s kind %q, want %q (all: %+v)", f, kinds[f], k, changes)
				}
			}
			for mp, kind := range map[string]string{"/logs": "removed", "/new": "appeared"} {
				changes, err := p.History(ctx, "a1", mp)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(changes, func(c Change) bool { return c.Kind == kind }) {
					t.Errorf("history of %s: no %s entry: %+v", mp, kind, changes)
				}
			}
		})
	}
}

// TestRunSyncsAndCallsAfterSync: Run's loop syncs a snapshot stored while
// it runs (no reader asks) and calls AfterSync after its syncs; it stops
// with its context.
func TestRunSyncsAndCallsAfterSync(t *testing.T) {
	t.Parallel()
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e)
			after := make(chan struct{}, 100)
			p := New(st, Options{SyncPeriod: 5 * time.Millisecond, AfterSync: func(context.Context) error {
				select {
				case after <- struct{}{}:
				default:
				}
				return nil
			}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-after // the first full sync
			report(t, st, "a1", "db1.example", 1, volume("/data", "u1", 32256))
			deadline := time.Now().Add(30 * time.Second)
			for len(rows(t, st)) != 1 {
				if time.Now().After(deadline) {
					t.Fatal("Run did not sync a stored snapshot within 30 s")
				}
				<-after
			}
		})
	}
}
