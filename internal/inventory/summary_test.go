package inventory

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/store"
)

// TestSummary checks the summary against the volumes' own JSON: counts
// by verdict, profile and rule, the penalty sums, the top offenders'
// order, degraded counts, and that filters apply.
func TestSummary(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			st := openStore(t, e.dsn(t))
			seedFleet(t, st, 10, 3)
			if err := st.PutBaselineStates(context.Background(), []store.BaselineState{
				{AgentID: "agent01", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "x", UpdatedAt: time.Now()},
				{AgentID: "agent02", MountPoint: "/data0", State: "ok", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(New(st, Options{}))
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
				pen := body["estimated_penalty"].([]any)
				for i, want := range []float64{eq8, eq64} {
					got := num64(pen[i].(map[string]any)["volume_equivalents"])
					if math.Abs(got-want) > 1e-9 {
						t.Errorf("summary?%s penalty[%d] = %v, want %v", filter, i, got, want)
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
