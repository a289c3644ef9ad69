package exporter

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// refresh brings c.out up to date with the store for the shard sel (the
// fleet-wide series and the volumes' geometry for every shard; the
// baselines of sel's volumes only); c.mu is held. A failed read leaves
// only the evaluator's families and plumbline_exporter_store_success 0,
// and the next scrape reads all again.
func (c *Collector) refresh(sel shardSel) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	now := c.opts.Now()
	c.gen++
	ev := c.buildEvaluator()
	if err := c.refreshStore(ctx, now, ev, sel); err != nil {
		c.opts.Logger.Error("metrics snapshot", "err", err)
		c.forget()
		c.set(famStoreSuccess, []*series{c.series(famStoreSuccess, 0)})
	} else {
		c.set(famStoreSuccess, []*series{c.series(famStoreSuccess, 1)})
	}
	c.publish()
}

func (c *Collector) refreshStore(ctx context.Context, now time.Time, ev EvaluatorStatus, sel shardSel) error {
	rebuildVol, err := c.readVolumes(ctx, now)
	if err != nil {
		return err
	}
	if sel.hasGlobal() { // only shard 0 shows them
		c.buildAgents(now)
		if err := c.buildSlowMembers(ctx); err != nil {
			return err
		}
	}
	if rebuildVol {
		c.buildVolumes()
	}
	return c.refreshBaselines(ctx, now, ev, sel)
}

// forget drops every input and every family but the evaluator's, so the
// next scrape reads all again.
func (c *Collector) forget() {
	c.hosts, c.seqs, c.vols, c.volsOK, c.present = nil, nil, nil, false, nil
	c.volParts, c.baseParts, c.pass = map[volKey]*volPart{}, map[volKey]*basePart{}, passReads{}
	for i := range c.out {
		switch i {
		case famEvalLast, famEvalRuns, famEvalFailures:
		default:
			c.out[i].reset() // absent
		}
	}
	c.bodies = nil
}

// readVolumes reads the agents and (when due) the record counts every
// time; the judged sequences (and when each record was judged) when an
// agent wrote since the last read, and the judged records when one moved;
// both at least every MaxAge (a volume judged again under new rules keeps
// its sequence and no agent writes).
func (c *Collector) readVolumes(ctx context.Context, now time.Time) (rebuild bool, err error) {
	hosts, err := c.st.ListHosts(ctx)
	if err != nil {
		return false, err
	}
	if c.counts == nil || now.Sub(c.countedAt) >= c.opts.RecordCountsEvery || now.Before(c.countedAt) {
		counts, err := c.st.RecordCounts(ctx)
		if err != nil {
			return false, err
		}
		c.counts, c.countedAt = counts, now
	}
	expired := now.Sub(c.readAt) >= c.opts.MaxAge || now.Before(c.readAt)
	renamed := !slices.EqualFunc(hosts, c.hosts, func(a, b store.Agent) bool { return a.ID == b.ID && a.Hostname == b.Hostname })
	ingested := renamed || !slices.EqualFunc(hosts, c.hosts, func(a, b store.Agent) bool { return a.LastSeen.Equal(b.LastSeen) })
	c.hosts = hosts
	if c.volsOK && !expired && !ingested {
		return false, nil
	}
	// The sequences first, then the records: a record written after the
	// first read shows in it at the next.
	seqs, err := c.st.ListJudgedSequences(ctx)
	if err != nil {
		return false, err
	}
	if !c.volsOK || renamed || !slices.EqualFunc(seqs, c.seqs, sameJudgement) {
		vols, err := c.st.ListJudgedVolumes(ctx)
		if err != nil {
			return false, err
		}
		c.vols, rebuild = vols, true
	}
	c.seqs, c.volsOK = seqs, true
	if expired {
		c.readAt = now
	}
	return rebuild, nil
}

// sameJudgement: the same volume's record, of the same snapshot, written at
// the same time.
func sameJudgement(a, b store.VolumeSequence) bool {
	return a.AgentID == b.AgentID && a.MountPoint == b.MountPoint && a.Sequence == b.Sequence && a.JudgedAt.Equal(b.JudgedAt)
}

// publish puts the families' series in order and drops the cached bodies
// of the shards whose series changed.
func (c *Collector) publish() {
	for i := range c.out {
		c.out[i].update()
	}
	if c.changes.global || len(c.changes.hashes) > 0 {
		for k := range c.bodies {
			if c.changes.touches(shardSel{i: k.shard, n: k.shards}) {
				delete(c.bodies, k)
			}
		}
	}
	c.changes.global, c.changes.hashes = false, c.changes.hashes[:0]
}

// series encodes one gauge or counter of family fam with value v; values
// are in the family's declared label order.
func (c *Collector) series(fam int, v float64, values ...string) *series {
	return c.fams[fam].encodeSeries(fam, values, v)
}

// set makes ss the only series of a family-wide family.
func (c *Collector) set(fam int, ss []*series) { c.out[fam].replace(ss, c.gen) }

// rebuild makes ss the series part p contributes, dropping those it no
// longer does.
func (c *Collector) rebuild(p *part, ss []*series) {
	for i, s := range ss {
		if i < len(p.series) {
			// Most often the same series as last time, at the same place:
			// no need to look it up.
			if old := p.series[i]; !old.dead && old.owner == p && old.fam == s.fam && old.key == s.key {
				c.out[s.fam].replaceBytes(old, s)
				old.gen, ss[i] = c.gen, old
				continue
			}
		}
		ss[i] = c.out[s.fam].put(s, p, c.gen)
	}
	c.sweep(p)
	p.series = ss
}

// sweep drops p's series that it did not emit in this refresh.
func (c *Collector) sweep(p *part) {
	for _, s := range p.series {
		if !s.dead && s.owner == p && s.gen != c.gen {
			c.out[s.fam].drop(s)
		}
	}
}

// volumeGroups yields the runs of consecutive elements of one volume.
func volumeGroups[T any](s []T, key func(*T) volKey) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for i := 0; i < len(s); {
			k := key(&s[i])
			j := i + 1
			for j < len(s) && key(&s[j]) == k {
				j++
			}
			if !yield(s[i:j:j]) {
				return
			}
			i = j
		}
	}
}
