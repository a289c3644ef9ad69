package inventory

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// summaryIndex is the summary's in-memory copy of the inventory: per
// volume its summary columns as small integers (strings interned), its
// split fractions and its findings' (rule, severity) pairs — about 150
// bytes a volume, 15 MB at 100,000 volumes. A summary of any filter
// (host and mount point globs matched as the store's LIKE, ASCII
// case-insensitive, once per distinct name) is one pass over
// it in Go — 1-11 ms at 100,000 volumes, where the SQL aggregates cost
// 0.3-2.3 s on SQLite — plus one query for the top offenders' rows by id.
//
// The index is built by refreshIndex (the API's loop, off the request
// path) from one read-only snapshot of the inventory tables
// (store.ScanSummarySnapshot), so it is exactly the tables at its
// generation; a summary from it equals the SQL one at that generation
// (counts exactly; the penalty sums up to the last bits of a float64
// sum). Requests read the newest complete index (API.sumIdx).
type summaryIndex struct {
	// gen is the store generation the index is exactly; built is when
	// its snapshot was begun.
	gen   uint64
	built time.Time
	strs  []string
	dict  map[string]int32
	vols  []ixVolume
	// pairs are the distinct (rule, severity) pairs of findings.
	pairs []ixPair
}

type ixVolume struct {
	id                                                                    string
	agent, host, mount, verdict, severity, profile, raid, media, fs, rank int32
	source                                                                int32
	stripe, offset                                                        int64
	split                                                                 [vocab.NumIOSizes]float64 // per vocab.IOSizes
	baseline, degraded                                                    bool
	// pairs: indexes into summaryIndex.pairs of the volume's findings,
	// without repeats.
	pairs []int32
}

type ixPair struct{ rule, severity int32 }

// buildSummaryIndex reads the inventory into a summaryIndex.
func buildSummaryIndex(ctx context.Context, st Store) (*summaryIndex, error) {
	ix := &summaryIndex{built: time.Now(), dict: map[string]int32{}}
	dict := ix.dict
	intern := func(s string) int32 {
		if i, ok := dict[s]; ok {
			return i
		}
		i := int32(len(ix.strs))
		ix.strs = append(ix.strs, s)
		dict[s] = i
		return i
	}
	byID := map[string]int32{}
	pairIdx := map[ixPair]int32{}
	gen, err := st.ScanSummarySnapshot(ctx, func(r *store.SummaryRow) error {
		byID[r.ID] = int32(len(ix.vols))
		ix.vols = append(ix.vols, ixVolume{id: r.ID, agent: intern(r.AgentID), host: intern(r.Hostname), mount: intern(r.MountPoint),
			verdict: intern(r.Verdict), severity: intern(r.Severity), profile: intern(r.Profile), raid: intern(r.RAIDLevel),
			media: intern(r.Media), fs: intern(r.FSType), rank: int32(r.SeverityRank), stripe: r.StripeUnitBytes, source: intern(r.StripeUnitSource),
			offset: r.DataOffsetBytes, split: r.SplitFraction, baseline: r.HasBaseline, degraded: r.Degraded})
		return nil
	}, func(id, rule, severity string) error {
		vi, ok := byID[id]
		if !ok {
			return nil // a finding without its volume: none in one snapshot
		}
		p := ixPair{intern(rule), intern(severity)}
		pi, ok := pairIdx[p]
		if !ok {
			pi = int32(len(ix.pairs))
			ix.pairs = append(ix.pairs, p)
			pairIdx[p] = pi
		}
		v := &ix.vols[vi]
		if !slices.Contains(v.pairs, pi) {
			v.pairs = append(v.pairs, pi)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ix.gen = gen
	return ix, nil
}

// kbn is a Kahan-Babuska-Neumaier sum, as SQLite's SUM over REAL values.
type kbn struct{ s, c float64 }

func (k *kbn) add(r float64) {
	t := k.s + r
	if math.Abs(k.s) > math.Abs(r) {
		k.c += (k.s - t) + r
	} else {
		k.c += (r - t) + k.s
	}
	k.s = t
}

func (k kbn) sum() float64 { return k.s + k.c }

// summarize computes the summary of f (answers(f) must hold), the top
// offenders' ids in their order (their rows are read from the store).
func (ix *summaryIndex) summarize(f store.VolumeFilter, top int) (*store.InventorySummary, []string) {
	acc := newSummaryAcc(ix, top)
	m, ok := ix.matcher(f)
	if ok && !m.none {
		for vi := range ix.vols {
			if m.match(&ix.vols[vi]) {
				acc.add(int32(vi))
			}
		}
	}
	return acc.result()
}

// summaryAcc gathers a summary in one pass over the matching volumes.
type summaryAcc struct {
	ix  *summaryIndex
	top int
	sum *store.InventorySummary
	// groups per verdict × severity, as the SQL sums them.
	groups     map[[2]int32]*ixGroup
	hosts      []bool
	ruleCounts []int64
	offenders  []int32 // the best top so far, in order
}

// ixGroup is one verdict × severity group: per I/O size the volumes
// affected (a) and known (k), and the sum of split fractions (s).
type ixGroup struct {
	verdict, severity int32
	n                 int64
	a, k              [vocab.NumIOSizes]int64
	s                 [vocab.NumIOSizes]kbn
}

func newSummaryAcc(ix *summaryIndex, top int) *summaryAcc {
	return &summaryAcc{ix: ix, top: top,
		sum:    &store.InventorySummary{ByVerdict: map[string]int64{}, ByProfile: map[string]int64{}, BySeverity: map[string]int64{}},
		groups: map[[2]int32]*ixGroup{}, hosts: make([]bool, len(ix.strs)), ruleCounts: make([]int64, len(ix.pairs))}
}

// add counts volume vi.
func (a *summaryAcc) add(vi int32) {
	v := &a.ix.vols[vi]
	key := [2]int32{v.verdict, v.severity}
	g := a.groups[key]
	if g == nil {
		g = &ixGroup{verdict: v.verdict, severity: v.severity}
		a.groups[key] = g
	}
	g.n++
	a.sum.Volumes++
	a.sum.ByProfile[a.ix.strs[v.profile]]++
	a.hosts[v.agent] = true
	if v.baseline {
		a.sum.WithBaseline++
		if v.degraded {
			a.sum.Degraded++
		}
	}
	for _, p := range v.pairs {
		a.ruleCounts[p]++
	}
	for i, f := range v.split {
		g.a[i], g.k[i] = g.a[i]+affected(f, &g.s[i]), g.k[i]+known(f)
	}
	if a.top > 0 && v.split[0] > 0 && (len(a.offenders) < a.top || a.better(vi, a.offenders[len(a.offenders)-1]) < 0) {
		i, _ := slices.BinarySearchFunc(a.offenders, vi, a.better)
		a.offenders = slices.Insert(a.offenders, i, vi)
		if len(a.offenders) > a.top {
			a.offenders = a.offenders[:a.top]
		}
	}
}

// affected adds a split fraction above 0 to the sum and counts it.
func affected(f float64, sum *kbn) int64 {
	if f > 0 {
		sum.add(f)
		return 1
	}
	return 0
}

// known counts a known split fraction (unknown: -1).
func known(f float64) int64 {
	if f >= 0 {
		return 1
	}
	return 0
}

// better orders the top offenders: the order of
// inventory_volumes_offenders (each size's split fraction descending,
// smallest size first; severity descending; id).
func (a *summaryAcc) better(x, y int32) int {
	v, w := &a.ix.vols[x], &a.ix.vols[y]
	for i := range v.split {
		if c := cmp.Compare(w.split[i], v.split[i]); c != 0 {
			return c
		}
	}
	return cmp.Or(cmp.Compare(w.rank, v.rank), cmp.Compare(v.id, w.id))
}

// result is the summary, and the top offenders' ids in order.
func (a *summaryAcc) result() (*store.InventorySummary, []string) {
	ix, sum := a.ix, a.sum
	for _, h := range a.hosts {
		if h {
			sum.Hosts++
		}
	}
	gs := slices.Collect(maps.Values(a.groups))
	slices.SortFunc(gs, func(x, y *ixGroup) int {
		return cmp.Or(cmp.Compare(ix.strs[x.verdict], ix.strs[y.verdict]), cmp.Compare(ix.strs[x.severity], ix.strs[y.severity]))
	})
	sum.Penalties = make([]store.Penalty, vocab.NumIOSizes)
	for i := range sum.Penalties {
		sum.Penalties[i].IOSizeBytes = int(vocab.IOSize(i))
	}
	for _, g := range gs {
		sum.ByVerdict[ix.strs[g.verdict]] += g.n
		sum.BySeverity[ix.strs[g.severity]] += g.n
		for i := range sum.Penalties {
			p := &sum.Penalties[i]
			p.Affected, p.VolumeEquivalents, p.Known = p.Affected+g.a[i], p.VolumeEquivalents+g.s[i].sum(), p.Known+g.k[i]
		}
	}
	for i, n := range a.ruleCounts {
		if n > 0 {
			p := ix.pairs[i]
			sum.ByRule = append(sum.ByRule, store.RuleCount{Rule: ix.strs[p.rule], Severity: ix.strs[p.severity], Volumes: n})
		}
	}
	slices.SortFunc(sum.ByRule, func(x, y store.RuleCount) int {
		return cmp.Or(cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Severity, y.Severity))
	})
	var ids []string
	for _, vi := range a.offenders {
		ids = append(ids, ix.vols[vi].id)
	}
	return sum, ids
}
