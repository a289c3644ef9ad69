package store

import (
	"testing"
	"time"
)

// An agent's certificate validity is what its latest UpsertAgent said: a
// renewal replaces it, a Hello without a certificate clears it, and a
// certificate that "never expires" (9999-12-31, RFC 5280) is kept as the
// latest time the column holds instead of overflowing.
func TestAgentCertificateValidity(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		issued := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		never := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		for _, step := range []struct {
			name                  string
			notBefore, notAfter   time.Time
			wantBefore, wantAfter time.Time
		}{
			{"enrolled", issued, issued.Add(30 * 24 * time.Hour), issued, issued.Add(30 * 24 * time.Hour)},
			{"renewed", issued.Add(20 * 24 * time.Hour), issued.Add(50 * 24 * time.Hour), issued.Add(20 * 24 * time.Hour), issued.Add(50 * 24 * time.Hour)},
			{"no expiry", issued, never, issued, time.Unix(0, 1<<63-1).UTC()},
			{"insecure", time.Time{}, time.Time{}, time.Time{}, time.Time{}},
		} {
			a := Agent{ID: "db1", Hostname: "db1.example", CertNotBefore: step.notBefore, CertNotAfter: step.notAfter}
			if err := s.UpsertAgent(t.Context(), a); err != nil {
				t.Fatalf("%s: UpsertAgent: %v", step.name, err)
			}
			hosts, err := s.ListHosts(t.Context())
			if err != nil || len(hosts) != 1 {
				t.Fatalf("%s: ListHosts = %v, %v", step.name, hosts, err)
			}
			if got := hosts[0]; !got.CertNotBefore.Equal(step.wantBefore) || !got.CertNotAfter.Equal(step.wantAfter) {
				t.Errorf("%s: validity %v – %v, want %v – %v", step.name, got.CertNotBefore, got.CertNotAfter, step.wantBefore, step.wantAfter)
			}
		}
	})
}
