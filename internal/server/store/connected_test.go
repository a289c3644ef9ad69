package store

import (
	"fmt"
	"testing"
	"time"
)

// MarkConnected moves each listed agent's ConnectedAt forward (never
// back: another replica may have noted a later time), in chunks, leaves
// LastSeen alone and ignores agents it does not know; Alive is the later
// of the two.
func TestMarkConnected(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		seen := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		ids := make([]string, markConnectedChunk+2) // two statements
		for i := range ids {
			ids[i] = fmt.Sprintf("a%04d", i)
			if err := s.UpsertAgent(t.Context(), Agent{ID: ids[i], Hostname: "vm", LastSeen: seen}); err != nil {
				t.Fatal(err)
			}
		}
		later, earlier := seen.Add(time.Hour), seen.Add(30*time.Minute)
		if err := s.MarkConnected(t.Context(), append(ids, "unknown"), later); err != nil {
			t.Fatalf("MarkConnected: %v", err)
		}
		if err := s.MarkConnected(t.Context(), ids[:1], earlier); err != nil {
			t.Fatalf("MarkConnected (earlier): %v", err)
		}
		hosts, err := s.ListHosts(t.Context())
		if err != nil || len(hosts) != len(ids) {
			t.Fatalf("ListHosts = %d hosts, %v; want %d", len(hosts), err, len(ids))
		}
		for _, h := range hosts {
			if !h.ConnectedAt.Equal(later) || !h.LastSeen.Equal(seen) || !h.Alive().Equal(later) {
				t.Fatalf("%s: ConnectedAt %v, LastSeen %v, Alive %v; want %v, %v, %v", h.ID, h.ConnectedAt, h.LastSeen, h.Alive(), later, seen, later)
			}
		}
	})
}
