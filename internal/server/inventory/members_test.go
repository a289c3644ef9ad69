package inventory

import (
	"context"
	"encoding/csv"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/store"
)

// memberIntervals are n minutes of md0 (on /data) with sdd taking readMS
// per read and its two siblings 2 ms.
func memberIntervals(from uint64, n int, t0 time.Time, readMS uint64) []store.Record {
	var out []store.Record
	for i := range n {
		m := func(dev string, ms uint64) store.MemberCounters {
			return store.MemberCounters{Device: dev, State: []string{"in_sync"}, Reads: 1000, ReadTimeMS: 1000 * ms, ReadSectors: 16000, IOTimeMS: 500 * ms}
		}
		sdd := m("sdd", readMS)
		sdd.ByID, sdd.Serial = []string{"ata-ST4000NM_ZC1"}, "ZC1"
		at := t0.Add(time.Duration(i) * time.Minute)
		out = append(out, store.Record{Sequence: from + uint64(i), Kind: store.KindMemberIO, ProducedAt: at, Payload: []byte{1},
			MemberIO: &store.MemberIO{StartedAt: at, Interval: time.Minute, Groups: []store.MemberGroup{{Device: "md0", Kind: "md",
				MountPoints: []string{"/data"}, Members: []store.MemberCounters{m("sdb", 2), m("sdc", 2), sdd}}}}})
	}
	return out
}

// TestSlowMembersColumns: on both engines, a volume with a member the
// sibling judge names slow shows it, in the JSON list, the volume's own
// page and the CSV alike; its neighbour shows none; once the judge clears
// it, it is gone from all three.
func TestSlowMembersColumns(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			reportMeasured(t, st, "hidden", "hw01.example", 1, nil, hiddenStripeVolume("/data"), hiddenStripeVolume("/plain"))
			t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			if _, err := st.AppendBatch(ctx, "hidden", memberIntervals(2, 5, t0, 7)); err != nil {
				t.Fatal(err)
			}
			j := members.New(st, members.Options{})
			if _, err := j.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			srv := serveSyncing(t, st, Options{SyncPeriod: 0})
			defer srv.Close()

			byMount := func() map[string]map[string]any {
				out := map[string]map[string]any{}
				for _, v := range list(t, srv.URL, "host=hw01.example", 10) {
					out[v["mount_point"].(string)] = v
				}
				return out
			}
			vols := byMount()
			slow, _ := vols["/data"]["slow_members"].([]any)
			if len(slow) != 1 {
				t.Fatalf("/data slow_members = %v, want sdd", vols["/data"]["slow_members"])
			}
			m := slow[0].(map[string]any)
			if m["array"] != "md0" || m["member"] != "sdd" || m["serial"] != "ZC1" || m["direction"] != "read" || m["kind"] != "md" ||
				num(m["ratio"]) != 3.5 || m["since"] != "2026-11-01T00:00:00Z" || m["updated_at"] != "2026-11-01T00:05:00Z" ||
				num(m["await_seconds"]) != 0.007 || num(m["siblings_await_seconds"]) != 0.002 {
				t.Errorf("/data slow member %v; want md0/sdd (ZC1) reads ×3.5 since 00:00", m)
			}
			if got, ok := vols["/plain"]["slow_members"].([]any); !ok || len(got) != 0 {
				t.Errorf("/plain slow_members = %v, want []", vols["/plain"]["slow_members"])
			}
			code, one := get(t, srv.URL+"/api/v1/volumes/"+vols["/data"]["id"].(string))
			if got, _ := one["slow_members"].([]any); code != http.StatusOK || len(got) != 1 {
				t.Errorf("GET /api/v1/volumes/{id}: %d, slow_members %v; want sdd", code, one["slow_members"])
			}
			if cell := csvCell(t, srv.URL, "/data", "slow_members"); cell != "md0/sdd (serial ZC1) read ×3.5 since 2026-11-01T00:00:00Z" {
				t.Errorf("CSV slow_members of /data = %q", cell)
			}

			if _, err := st.AppendBatch(ctx, "hidden", memberIntervals(7, 3, t0.Add(5*time.Minute), 2)); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := byMount()["/data"]["slow_members"].([]any); len(got) != 0 {
				t.Errorf("after the judge cleared sdd: /data slow_members = %v, want []", got)
			}
			if cell := csvCell(t, srv.URL, "/data", "slow_members"); cell != "" {
				t.Errorf("after the judge cleared sdd: CSV slow_members = %q, want empty", cell)
			}
		})
	}
}

// csvCell is the CSV cell of column col in the row of mount point mp.
func csvCell(t *testing.T, base, mp, col string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/volumes?format=csv")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	recs, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	cols := VolumeCSVColumns()
	for _, r := range recs[1:] {
		if r[slices.Index(cols, "mount_point")] == mp {
			return r[slices.Index(cols, col)]
		}
	}
	t.Fatalf("no CSV row of %s", mp)
	return ""
}
