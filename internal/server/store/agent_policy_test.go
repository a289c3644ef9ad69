package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// What agents say of their policy: a Hello's labels, a WatchPolicy's
// effective configuration; a later Hello keeps the configuration; found by
// host name and by agent id.
func TestAgentPolicy(t *testing.T) {
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		register(t, s, "a2")
		at := time.Unix(1_800_000_000, 0).UTC()
		steps := []AgentPolicy{
			{AgentID: "a1", Labels: map[string]string{"role": "postgres"}, ReportedAt: at},
			{AgentID: "a1", Labels: map[string]string{"role": "postgres"}, EffectiveConfig: "probes: []\n", AppliedDigest: "ab12", ReportedAt: at.Add(time.Second)},
			{AgentID: "a1", Labels: map[string]string{"role": "postgres", "env": "prod"}, ReportedAt: at.Add(2 * time.Second)},
			{AgentID: "a2", ReportedAt: at},
		}
		for _, p := range steps {
			if err := s.PutAgentPolicy(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.AgentPolicies(ctx, "a1.example")
		if err != nil {
			t.Fatal(err)
		}
		want := []AgentPolicy{{AgentID: "a1", Hostname: "a1.example", Labels: map[string]string{"role": "postgres", "env": "prod"},
			EffectiveConfig: "probes: []\n", AppliedDigest: "ab12", ReportedAt: at.Add(2 * time.Second)}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("AgentPolicies(a1.example) (-want +got):\n%s", diff)
		}
		if got, err := s.AgentPolicies(ctx, "a2"); err != nil || len(got) != 1 || len(got[0].Labels) != 0 || got[0].EffectiveConfig != "" {
			t.Errorf("AgentPolicies(a2) = %+v, %v: want a2 without labels or configuration", got, err)
		}
		if got, err := s.AgentPolicies(ctx, "nobody"); err != nil || len(got) != 0 {
			t.Errorf("AgentPolicies(nobody) = %+v, %v", got, err)
		}
	})
}
