package ingest

import (
	"sync"
	"time"
)

// identityConflict says that two live agents share one identity: an
// incarnation that a newer one (superseded by) had replaced spoke again.
// The store counts it (the hosts API and the
// plumbline_agent_identity_conflicts_total metric show it); the log says
// it once per episode (episodeLog): at its first conflict, and again only
// after conflictEpisodeGap without one.
func (s *Service) identityConflict(agent, incarnation, current, op string) {
	if !s.conflictLog.begins(agent, s.opts.Now()) {
		return
	}
	s.opts.Logger.Error("two agents are reporting as one identity (two hosts sharing one certificate, or a copied spool): records of both are kept, but the host's geometry flips between them; logged once per episode, plumbline_agent_identity_conflicts_total counts every conflict",
		"agent", agent, "incarnation", incarnation, "other_incarnation", current, "call", op, "quiet_after", conflictEpisodeGap)
}

// conflictEpisodeGap ends an identity-conflict episode of an agent: a
// conflict after this long without one begins a new episode. Two live
// agents on one identity conflict at every batch; the log says so once per
// episode (the count, plumbline_agent_identity_conflicts_total, has every
// one).
const conflictEpisodeGap = 10 * time.Minute

// episodeLog allows one log line per key per episode: a call more than
// conflictEpisodeGap after the key's previous call (logged or not) begins
// one. Entries older than that are dropped when the map grows, so it stays
// bounded by the keys of the last gap.
type episodeLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// begins records a conflict of key at now and reports whether it begins
// an episode.
func (l *episodeLog) begins(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	t, ok := l.last[key]
	l.last[key] = now
	if ok && now.Sub(t) < conflictEpisodeGap {
		return false
	}
	if len(l.last) > 1024 {
		for k, t := range l.last {
			if now.Sub(t) >= conflictEpisodeGap {
				delete(l.last, k)
			}
		}
	}
	return true
}
