package inventory

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestSummaryIndexMatchesSQL: on a randomized fleet (random geometry,
// volumes per host and baseline states), the summary computed from the
// in-memory index equals the store's SQL aggregates for every combination
// of the filters the index serves — every subset of verdict, severity,
// profile, raid_level, media, fs, rule and degraded with values the fleet
// has (and values it has not), and random combinations with host and
// mount point (exact and globs, mixed case, LIKE's own wildcards as
// literals), agent, stripe unit, data offset and minimum split fraction.
func TestSummaryIndexMatchesSQL(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 7))
			var states []store.BaselineState
			api0 := New(st, Options{})
			for h := range 40 {
				agent := fmt.Sprintf("agent%02d", h)
				n := 1 + rng.IntN(5)
				var mps []string
				for v := range n {
					mps = append(mps, fmt.Sprintf("/data%d", v))
				}
				host := fmt.Sprintf("db%02d.example", h)
				if h%5 == 0 {
					host = fmt.Sprintf("DB%02d.Example", h)
				}
				// A first snapshot with one more volume, replaced by the
				// second (the extra one is removed).
				var first, second []*plumblinev1.Volume
				for _, mp := range append(mps, "/old") {
					first = append(first, fleetVolume(rng.IntN(36), mp))
				}
				for _, mp := range mps {
					second = append(second, fleetVolume(rng.IntN(36), mp))
				}
				report(t, st, agent, host, 1, first...)
				if err := api0.Sync(ctx, false); err != nil {
					t.Fatal(err)
				}
				report(t, st, agent, host, 2, second...)
				for _, mp := range mps {
					if rng.IntN(3) == 0 {
						states = append(states, store.BaselineState{AgentID: agent, MountPoint: mp, State: "x", Degraded: rng.IntN(2) == 0, UpdatedAt: time.Now()})
					}
				}
			}
			if err := st.PutBaselineStates(ctx, states); err != nil {
				t.Fatal(err)
			}
			api := New(st, Options{})
			if err := api.Sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			ix := api.sumIdx.Load()
			gen, err := st.InventoryGeneration(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ix == nil || ix.gen != gen {
				t.Fatalf("index not at the store's generation %d after Sync: %+v", gen, ix)
			}

			// The values of each dimension in the fleet, plus one it has not.
			values := map[string][]string{}
			add := func(dim, v string) {
				for _, x := range values[dim] {
					if x == v {
						return
					}
				}
				values[dim] = append(values[dim], v)
			}
			for _, v := range ix.vols {
				add("verdict", ix.strs[v.verdict])
				add("profile", ix.strs[v.profile])
				add("raid", ix.strs[v.raid])
				add("media", ix.strs[v.media])
				add("fs", ix.strs[v.fs])
			}
			for _, p := range ix.pairs {
				add("rule", ix.strs[p.rule])
				add("severity", ix.strs[p.severity])
			}
			for dim := range values {
				add(dim, "no-such-"+dim)
			}
			pick := func(dim string) string { return values[dim][rng.IntN(len(values[dim]))] }

			check := func(f store.VolumeFilter, top int) {
				t.Helper()
				if !ix.answers(f) {
					t.Fatalf("index does not answer %+v", f)
				}
				got, err := api.summaryOf(ctx, ix, f, top)
				if err != nil {
					t.Fatal(err)
				}
				want, err := st.SummarizeVolumes(ctx, f, top)
				if err != nil {
					t.Fatal(err)
				}
				if now, _ := st.InventoryGeneration(ctx); now != gen {
					t.Fatalf("generation moved during the test")
				}
				if len(got.Penalties) != len(want.Penalties) {
					t.Fatalf("%+v: penalties %+v, want %+v", f, got.Penalties, want.Penalties)
				}
				for i := range got.Penalties {
					g, w := got.Penalties[i], want.Penalties[i]
					if math.Abs(g.VolumeEquivalents-w.VolumeEquivalents) > 1e-9*math.Max(1, math.Abs(w.VolumeEquivalents)) {
						t.Errorf("%+v: penalty %d %v, want %v", f, i, g.VolumeEquivalents, w.VolumeEquivalents)
					}
					g.VolumeEquivalents, w.VolumeEquivalents = 0, 0
					if g != w {
						t.Errorf("%+v: penalty %+v, want %+v", f, g, w)
					}
				}
				got.Penalties, want.Penalties = nil, nil
				for _, s := range []*store.InventorySummary{got, want} {
					if len(s.ByRule) == 0 {
						s.ByRule = nil
					}
					if len(s.TopOffenders) == 0 {
						s.TopOffenders = nil
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%+v top %d:\nindex %+v\nSQL   %+v", f, top, got, want)
				}
			}

			dims := []string{"verdict", "severity", "profile", "raid", "media", "fs", "rule", "degraded"}
			cols := map[string]store.Cond{"verdict": {Col: "verdict", Op: store.OpEq}, "severity": {Col: "severity", Op: store.OpFinding},
				"profile": {Col: "profile", Op: store.OpEq}, "raid": {Col: "raid_level", Op: store.OpEq}, "media": {Col: "media", Op: store.OpEq},
				"fs": {Col: "fs_type", Op: store.OpEq}, "rule": {Col: "rule", Op: store.OpFinding}}
			for mask := range 1 << len(dims) {
				f := store.VolumeFilter{}
				for i, dim := range dims {
					if mask&(1<<i) == 0 {
						continue
					}
					if dim == "degraded" {
						f = append(f, store.Cond{Op: store.OpDegraded, Value: rng.IntN(2) == 0})
						continue
					}
					c := cols[dim]
					c.Value = pick(dim)
					f = append(f, c)
				}
				check(f, []int{0, 1, 10, 100}[rng.IntN(4)])
			}
			// The other filters the index serves, in random combinations.
			for range 400 {
				f := store.VolumeFilter{}
				add := func(col string, op store.Op, v any) { f = append(f, store.Cond{Col: col, Op: op, Value: v}) }
				v := ix.vols[rng.IntN(len(ix.vols))]
				var host, mount string
				if rng.IntN(2) == 0 {
					host = ix.strs[v.host]
				}
				if rng.IntN(3) == 0 {
					add("agent_id", store.OpEq, ix.strs[v.agent])
				}
				if rng.IntN(2) == 0 {
					mount = ix.strs[v.mount]
				}
				if rng.IntN(3) == 0 {
					host = []string{"db1*", "DB1*", "db?3.*", "*.EXAMPLE", "*a*", "db_1*", "db%*", "*", "?*0.example", "d*b*e", "DB0?.Example"}[rng.IntN(11)]
				}
				if rng.IntN(4) == 0 {
					mount = []string{"/DATA?", "/data*", "*1", "/old*", "/d?ta0", "*"}[rng.IntN(6)]
				}
				if host != "" {
					add("hostname", store.OpMatch, host)
				}
				if mount != "" {
					add("mount_point", store.OpMatch, mount)
				}
				if rng.IntN(3) == 0 {
					add("stripe_unit_bytes", store.OpEq, v.stripe)
				}
				if rng.IntN(3) == 0 {
					add("data_offset_bytes", store.OpEq, v.offset)
				}
				if rng.IntN(2) == 0 {
					m := []float64{-1, 0, 0.01, 0.05, 0.1, 0.5, v.split[0], v.split[vocab.NumIOSizes-1]}[rng.IntN(8)]
					add([]string{"split_fraction_8k", "split_fraction_8k", "split_fraction_64k"}[rng.IntN(3)], store.OpAtLeast, m)
				}
				if rng.IntN(3) == 0 {
					add("verdict", store.OpEq, pick("verdict"))
				}
				if rng.IntN(3) == 0 {
					add("rule", store.OpFinding, pick("rule"))
					add("severity", store.OpFinding, pick("severity"))
				}
				if rng.IntN(3) == 0 {
					f = append(f, store.Cond{Op: store.OpDegraded, Value: rng.IntN(2) == 0})
				}
				check(f, 1+rng.IntN(20))
			}
		})
	}
}

// filterOf is the filter the API reads from a /summary query string
// (volumeFilters).
func filterOf(tb testing.TB, query string) store.VolumeFilter {
	tb.Helper()
	p, err := newParams(httptest.NewRequest(http.MethodGet, "/api/v1/summary?"+query, nil), summaryParams)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := p.volumeFilter()
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// changeDuringScan is a store whose summary snapshot lets change run
// once, after it has read its first row.
type changeDuringScan struct {
	*store.Store
	change func()
	once   sync.Once
}

func (c *changeDuringScan) ScanSummarySnapshot(ctx context.Context, vol func(*store.SummaryRow) error, finding func(volumeID, rule, severity string) error) (uint64, error) {
	return c.Store.ScanSummarySnapshot(ctx, func(r *store.SummaryRow) error {
		c.once.Do(c.change)
		return vol(r)
	}, finding)
}

// TestSummaryIndexIsOneSnapshot: changes committed while the index is
// being read — a host's volumes and their findings removed by a new
// snapshot and a sync, a baseline state — leave the index exactly the
// tables before them (the same summary as an index read before), at
// their generation: an index of a definite generation however busy the
// fleet.
func TestSummaryIndexIsOneSnapshot(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 3, 2)
			api := New(st, Options{})
			if err := api.Sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			ix0, err := buildSummaryIndex(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			cs := &changeDuringScan{Store: st, change: func() {
				report(t, st, "agent00", "db00.example", 2) // no volumes: both go, with their findings
				if err := api.Sync(ctx, false); err != nil {
					t.Error(err)
				}
				if err := st.PutBaselineStates(ctx, []store.BaselineState{
					{AgentID: "agent01", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "x", UpdatedAt: time.Now()},
				}); err != nil {
					t.Error(err)
				}
			}}
			ix, err := buildSummaryIndex(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			after, err := st.InventoryGeneration(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := ix.summarize(nil, 0)
			want, _ := ix0.summarize(nil, 0)
			if after == ix0.gen || ix.gen != ix0.gen || !reflect.DeepEqual(got, want) {
				t.Errorf("index read during changes: generation %d (before %d, after %d), summary\n%+v\nwant\n%+v", ix.gen, ix0.gen, after, got, want)
			}
		})
	}
}
