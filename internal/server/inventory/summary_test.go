package inventory

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// TestSummary checks the summary against the volumes' own JSON: counts
// by verdict, profile and rule, the penalty sums, the top offenders'
// order, degraded counts, and that filters apply.
func TestSummary(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 10, 3)
			if err := st.PutBaselineStates(context.Background(), []store.BaselineState{
				{AgentID: "agent01", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "x", UpdatedAt: time.Now()},
				{AgentID: "agent02", MountPoint: "/data0", State: "ok", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			srv := serveSyncing(t, st, Options{})
			defer srv.Close()
			for _, filter := range []string{"", "raid_level=raid10", "host=db0*&fs=xfs"} {
				all := list(t, srv.URL, filter, 1000)
				code, body := get(t, srv.URL+"/api/v1/summary?top=5&"+filter)
				if code != 200 {
					t.Fatalf("summary?%s: %d %v", filter, code, body)
				}
				byVerdict, byProfile, byRule := map[string]float64{}, map[string]float64{}, map[string]float64{}
				var eq8, eq64 float64
				hosts := map[string]bool{}
				for _, v := range all {
					byVerdict[alignmentOf(v)["verdict"].(string)]++
					byProfile[v["profile"].(string)]++
					hosts[v["host"].(string)] = true
					seen := map[string]bool{}
					for _, f := range findingsOf(v) {
						k := f["rule"].(string) + "/" + f["severity"].(string)
						if !seen[k] {
							byRule[k]++
							seen[k] = true
						}
					}
					if s := splitOf(v, "8192"); s > 0 {
						eq8 += s
					}
					if s := splitOf(v, "65536"); s > 0 {
						eq64 += s
					}
				}
				if num64(body["volumes"]) != float64(len(all)) || num64(body["hosts"]) != float64(len(hosts)) {
					t.Errorf("summary?%s: volumes %v hosts %v, want %d %d", filter, body["volumes"], body["hosts"], len(all), len(hosts))
				}
				for name, want := range map[string]map[string]float64{"by_verdict": byVerdict, "by_profile": byProfile} {
					got := body[name].(map[string]any)
					if len(got) != len(want) {
						t.Errorf("summary?%s %s = %v, want %v", filter, name, got, want)
					}
					for k, n := range want {
						if num64(got[k]) != n {
							t.Errorf("summary?%s %s[%s] = %v, want %v", filter, name, k, got[k], n)
						}
					}
				}
				rules := body["by_rule"].([]any)
				if len(rules) != len(byRule) {
					t.Errorf("summary?%s by_rule = %v, want %v", filter, rules, byRule)
				}
				for _, r := range rules {
					m := r.(map[string]any)
					if k := m["rule"].(string) + "/" + m["severity"].(string); num64(m["volumes"]) != byRule[k] {
						t.Errorf("summary?%s by_rule %s = %v, want %v", filter, k, m["volumes"], byRule[k])
					}
				}
				pen := map[float64]float64{} // volume equivalents by I/O size
				for _, p := range body["estimated_penalty"].([]any) {
					pen[num64(p.(map[string]any)["io_size_bytes"])] = num64(p.(map[string]any)["volume_equivalents"])
				}
				for size, want := range map[float64]float64{8 << 10: eq8, 64 << 10: eq64} {
					if got := pen[size]; math.Abs(got-want) > 1e-9 {
						t.Errorf("summary?%s penalty[%v] = %v, want %v", filter, size, got, want)
					}
				}
				top := body["top_offenders"].([]any)
				if len(top) == 0 || len(top) > 5 {
					t.Errorf("summary?%s: %d top offenders, want 1-5", filter, len(top))
				}
				prev := math.Inf(1)
				for _, o := range top {
					s := num64(o.(map[string]any)["split_fraction_8k"])
					if s > prev || s <= 0 {
						t.Errorf("summary?%s top offenders out of order: %v", filter, top)
					}
					prev = s
				}
				if filter == "" && (num64(body["degraded"]) != 1 || num64(body["with_baseline"]) != 2) {
					b, _ := json.Marshal(body)
					t.Errorf("degraded/with_baseline: %s", b)
				}
			}
		})
	}
}

// TestSummaryFollowsChanges: cached summaries (the whole fleet's and a
// filtered one) and pages show new reports, removed volumes and new
// baseline states within the documented bound — one SyncPeriod, a sync
// and an index build — with Run in the background as served; and at
// once after an explicit Sync.
func TestSummaryFollowsChanges(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 4, 3)
			const period = 50 * time.Millisecond
			srv, api := serveRunning(t, st, Options{SyncPeriod: period})
			summary := func(query string) map[string]any { return summaryAt(t, srv.URL, query) }
			// Warm both entries of the cache.
			if n := num64(summary("")["volumes"]); n != 12 {
				t.Fatalf("summary volumes = %v, want 12", n)
			}
			rel := num64(summary("host=db0*")["volumes"])
			// within polls until cond holds, failing after the bound (with
			// slack for a loaded test machine).
			within := func(what string, cond func() bool) {
				t.Helper()
				start := time.Now()
				for !cond() {
					if time.Since(start) > 100*period+5*time.Second {
						t.Fatalf("%s: not seen after %v", what, time.Since(start))
					}
					time.Sleep(5 * time.Millisecond)
				}
				t.Logf("%s: seen after %v", what, time.Since(start).Round(time.Millisecond))
			}

			// A new host with two volumes, one of which matches the filter.
			report(t, st, "agent-new", "db0new.example", 1, fleetVolume(1, "/data0"), fleetVolume(2, "/data1"))
			within("new host in the summary", func() bool {
				s := summary("")
				return num64(s["volumes"]) == 14 && num64(s["hosts"]) == 5
			})
			within("new host in the filtered summary", func() bool { return num64(summary("host=db0*")["volumes"]) == rel+2 })
			within("new host on a page", func() bool { return len(list(t, srv.URL, "host=db0new.example", 10)) == 2 })

			// A baseline state: pages at once (joined when read), the summary
			// within the bound.
			if err := st.PutBaselineStates(ctx, []store.BaselineState{
				{AgentID: "agent-new", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "x", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			if vols := list(t, srv.URL, "degraded=true", 10); len(vols) != 1 || vols[0]["baseline"] == nil {
				t.Errorf("degraded=true right after the state: %v", vols)
			}
			within("baseline state in the summary", func() bool { return num64(summary("")["degraded"]) == 1 })

			// The host reports again without /data1: removed everywhere.
			report(t, st, "agent-new", "db0new.example", 2, fleetVolume(1, "/data0"))
			within("removed volume in the summary", func() bool { return num64(summary("")["volumes"]) == 13 })
			within("removed volume in the filtered summary", func() bool { return num64(summary("host=db0*")["volumes"]) == rel+1 })

			// After an explicit Sync the cache is exact at once.
			report(t, st, "agent-new2", "db0new2.example", 1, fleetVolume(3, "/data0"))
			if err := api.Sync(ctx, false); err != nil {
				t.Fatal(err)
			}
			if n := num64(summary("")["volumes"]); n != 14 {
				t.Errorf("summary volumes right after Sync = %v, want 14", n)
			}
			if n := num64(summary("host=db0*")["volumes"]); n != rel+2 {
				t.Errorf("filtered summary volumes right after Sync = %v, want %v", n, rel+2)
			}
		})
	}
}

// TestSummaryConsistentWithVolumes: with Run's production period (2 s),
// a summary states the inventory generation it is of
// (Plumbline-Summary-Generation); after a report, a removal or a baseline
// change, a summary whose generation is the store's agrees with the
// volumes read at the same moment, and one comes within the bound.
func TestSummaryConsistentWithVolumes(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 4, 3)
			srv, _ := serveRunning(t, st, Options{SyncPeriod: 2 * time.Second})
			// agree waits until the summary and the pages show want volumes
			// in all, and checks that they agree.
			agree := func(what string, want int) {
				t.Helper()
				for _, filter := range []string{"", "host=db0*", "verdict=misaligned"} {
					var s map[string]any
					var vols []map[string]any
					start := time.Now()
					for {
						now, err := st.InventoryGeneration(ctx)
						if err != nil {
							t.Fatal(err)
						}
						vols = list(t, srv.URL, filter, 1000)
						var gen uint64
						s, gen = summaryGen(t, srv.URL, filter)
						if gen == now && (filter != "" || len(vols) == want) {
							break
						}
						if time.Since(start) > 30*time.Second {
							t.Fatalf("%s: summary?%s of generation %d, the store's %d, %d volumes (want %d) after %v", what, filter, gen, now, len(vols), want, time.Since(start))
						}
						time.Sleep(20 * time.Millisecond)
					}
					degraded := 0
					for _, v := range vols {
						if b, _ := v["baseline"].(map[string]any); b != nil && b["degraded"] == true {
							degraded++
						}
					}
					if num64(s["volumes"]) != float64(len(vols)) || num64(s["degraded"]) != float64(degraded) {
						t.Errorf("%s: summary?%s says %v volumes, %v degraded; /volumes %d, %d", what, filter, s["volumes"], s["degraded"], len(vols), degraded)
					}
				}
			}
			agree("at rest", 12)
			report(t, st, "agent-new", "db0new.example", 1, fleetVolume(1, "/data0"), fleetVolume(2, "/data1"))
			agree("after a new host's report", 14)
			report(t, st, "agent-new", "db0new.example", 2, fleetVolume(1, "/data0"))
			agree("after a volume went", 13)
			if err := st.PutBaselineStates(ctx, []store.BaselineState{
				{AgentID: "agent-new", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "x", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			agree("after a baseline state", 13)
		})
	}
}

// summaryGen is GET /api/v1/summary?query and the generation it states.
func summaryGen(t *testing.T, base, query string) (map[string]any, uint64) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/summary?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("summary?%s: %d %v %v", query, resp.StatusCode, err, body)
	}
	gen, err := strconv.ParseUint(resp.Header.Get("Plumbline-Summary-Generation"), 10, 64)
	if err != nil {
		t.Fatalf("summary?%s: Plumbline-Summary-Generation %q: %v", query, resp.Header.Get("Plumbline-Summary-Generation"), err)
	}
	return body, gen
}

// summaryAt is GET /api/v1/summary?query of the server at base.
func summaryAt(t *testing.T, base, query string) map[string]any {
	t.Helper()
	code, body := get(t, base+"/api/v1/summary?"+query)
	if code != 200 {
		t.Fatalf("summary?%s: %d %v", query, code, body)
	}
	return body
}
