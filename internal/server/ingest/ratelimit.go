package ingest

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters is a token bucket per agent identity. Buckets idle for
// limiterIdle are dropped (a full bucket is the same as a new one).
type limiters struct {
	mu        sync.Mutex
	m         map[string]*limiterEntry
	r         rate.Limit
	burst     int
	now       func() time.Time
	lastSweep time.Time
}

type limiterEntry struct {
	lim  *rate.Limiter
	last time.Time
}

const limiterIdle = 10 * time.Minute

func newLimiters(r rate.Limit, burst int, now func() time.Time) *limiters {
	return &limiters{m: map[string]*limiterEntry{}, r: r, burst: burst, now: now, lastSweep: now()}
}

func (l *limiters) allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(key, now).AllowN(now, 1)
}

// bucket is key's token bucket at now, made when missing; buckets idle for
// limiterIdle are swept at most once a minute. l.mu must be held.
func (l *limiters) bucket(key string, now time.Time) *rate.Limiter {
	if now.Sub(l.lastSweep) > time.Minute {
		for k, e := range l.m {
			if now.Sub(e.last) > limiterIdle {
				delete(l.m, k)
			}
		}
		l.lastSweep = now
	}
	e := l.m[key]
	if e == nil {
		e = &limiterEntry{lim: rate.NewLimiter(l.r, l.burst)}
		l.m[key] = e
	}
	e.last = now
	return e.lim
}
