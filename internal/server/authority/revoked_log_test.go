package authority

import (
	"testing"
	"time"
)

// TestRevokedRefusalsEpisode: a revoked agent's refusal is logged at its
// first refusal, not again within the hour, again an hour later, and at
// once in a new episode (after it was accepted again).
func TestRevokedRefusalsEpisode(t *testing.T) {
	t.Parallel()
	r := newRevokedRefusals()
	t0 := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		what     string
		id       string
		at       time.Duration
		accepted bool // accepted before this refusal
		want     bool
	}{
		{"first refusal", "a", 0, false, true},
		{"again at once", "a", time.Second, false, false},
		{"another agent", "b", 2 * time.Second, false, true},
		{"59 minutes on", "a", 59 * time.Minute, false, false},
		{"an hour on", "a", time.Hour, false, true},
		{"a new episode", "a", time.Hour + time.Minute, true, true},
	} {
		if c.accepted {
			r.accepted(c.id)
		}
		if got := r.due(c.id, t0.Add(c.at)); got != c.want {
			t.Errorf("%s: due(%s) = %v, want %v", c.what, c.id, got, c.want)
		}
	}
}
