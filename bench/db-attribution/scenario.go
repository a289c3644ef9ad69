//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/lab/fleetlab"
	"github.com/plumbline/plumbline/internal/vocab"
)

// scenario is one change made to a database's volume or workload, and
// the attribution it should get.
type scenario struct {
	name    string // device, load, throttle
	expect  string // the attribution's word
	apply   func(ctx context.Context, d *database) error
	restore func(ctx context.Context, d *database) error
}

// trial is one scenario run once on one database.
type trial struct {
	scenario, db string
	got          string // the first attribution after the change ("": none in time)
	reason       string
	correct      bool
	seconds      float64
	start, end   time.Time
	quiet        bool // the volume was judged healthy when the change was made
}

// bench is a running bench: the stack, its observer, the knobs.
type bench struct {
	stack       *fleetlab.Stack
	obs         *observer
	poll        time.Duration
	detect      time.Duration // time allowed for the attribution
	settle      time.Duration // time allowed to be judged healthy again
	loadX       int
	factor      float64
	iops, burst int
	logf        func(string, ...any)
}

func (b *bench) scenarios() []scenario {
	base := func(ctx context.Context, d *database) error { return d.setLoad(1, d.rate) }
	fault := func(args ...string) func(ctx context.Context, d *database) error {
		return func(ctx context.Context, d *database) error { return b.stack.Fault(ctx, d.array, args...) }
	}
	restore := fault("restore")
	return []scenario{
		{name: "device", expect: string(vocab.AttributionDevice), apply: fault("slow", "--member", "0", "--factor", fmt.Sprint(b.factor)), restore: restore},
		{name: "load", expect: string(vocab.AttributionLoad), apply: func(ctx context.Context, d *database) error {
			return d.setLoad(b.loadX, d.rate*float64(b.loadX))
		}, restore: base},
		{name: "throttle", expect: string(vocab.AttributionThrottle), apply: fault("throttle", "--iops", fmt.Sprint(b.iops), "--burst", fmt.Sprint(b.burst)), restore: restore},
	}
}

// matches reports whether an attribution is the expected one, whatever
// the separators ("load-or-database", "load or database").
func matches(got, expect string) bool {
	norm := func(s string) string {
		return strings.NewReplacer(" ", "-", "_", "-").Replace(strings.ToLower(strings.TrimSpace(s)))
	}
	return got != "" && norm(got) == norm(expect)
}

// runDB runs rounds × every scenario on one database, one after the
// other: wait until the volume is judged healthy, make the change, poll
// the server's judgement until it attributes a regression (or detect
// passes), undo the change.
func (b *bench) runDB(ctx context.Context, d *database, scs []scenario, rounds int) []trial {
	var out []trial
	for r := range rounds {
		for _, sc := range scs {
			if ctx.Err() != nil {
				return out
			}
			t := b.runTrial(ctx, d, sc)
			if ctx.Err() != nil && t.got == "" {
				b.logf("%s %s round %d: interrupted, not counted", d.name, sc.name, r+1)
				return out
			}
			b.logf("%s %s round %d: got %q (%s) after %.0fs: correct=%v quiet=%v", d.name, sc.name, r+1, t.got, t.reason, t.seconds, t.correct, t.quiet)
			out = append(out, t)
		}
	}
	return out
}

func (b *bench) runTrial(ctx context.Context, d *database, sc scenario) trial {
	t := trial{scenario: sc.name, db: d.name}
	t.quiet = b.waitQuiet(ctx, d, b.settle)
	t.start = time.Now()
	if err := sc.apply(ctx, d); err != nil {
		t.reason = "apply: " + err.Error()
		t.end = time.Now()
		return t
	}
	b.logf("%s: %s applied", d.name, sc.name)
	deadline := t.start.Add(b.detect)
	for time.Now().Before(deadline) {
		if ctxtime.Sleep(ctx, b.poll) != nil {
			break
		}
		j, ok, err := b.obs.judged(ctx, d.mount)
		if err != nil {
			b.logf("%s: %v", d.name, err)
			continue
		}
		if !ok || j.attribution == "" || !j.updated.After(t.start) {
			continue
		}
		t.got, t.reason = j.attribution, j.reason
		t.seconds = time.Since(t.start).Seconds()
		if j.attribution != string(vocab.AttributionUndetermined) {
			break // undetermined may still be settled by the next probe run
		}
	}
	t.correct = matches(t.got, sc.expect)
	if t.got == "" {
		t.reason = fmt.Sprintf("no attribution within %s", b.detect)
	}
	if err := sc.restore(context.WithoutCancel(ctx), d); err != nil {
		b.logf("%s: restore %s: %v", d.name, sc.name, err)
	}
	t.end = time.Now()
	return t
}

// waitQuiet waits until the volume's database judgement is healthy (not
// learning, not degraded, no attribution) and its probe histories are
// trusted and not degraded; false when limit passed first.
func (b *bench) waitQuiet(ctx context.Context, d *database, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		j, ok, err := b.obs.judged(ctx, d.mount)
		p, perr := b.obs.probe(ctx, d.mount)
		now := fmt.Sprintf("db %s/%q probe %d/%d trusted %s degraded=%v (errors %v %v)", j.state, j.attribution, p.trusted, p.kinds, p.state, p.degraded, err, perr)
		if now != last {
			b.logf("%s: %s", d.name, now)
			last = now
		}
		if err == nil && perr == nil && ok && j.attribution == "" && j.state != "learning" && j.state != "degraded" &&
			p.kinds > 0 && p.trusted == p.kinds && !p.degraded {
			return true
		}
		if time.Now().After(deadline) || ctxtime.Sleep(ctx, b.poll) != nil {
			return false
		}
	}
}
