package members

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// Options configure a Judge. Zero fields take their defaults.
type Options struct {
	// Interval between passes (default 30s).
	Interval time.Duration
	// BatchSize is how many agent intervals one store read returns
	// (default 500).
	BatchSize int
	// Config is the comparison's constants (DefaultConfig).
	Config Config
	Logger *slog.Logger
}

// Store is what the judge reads and writes.
type Store interface {
	PendingMemberIO(ctx context.Context, limit int) ([]store.MemberInterval, error)
	ListMemberStates(ctx context.Context) ([]store.MemberState, error)
	SaveMemberPass(ctx context.Context, p store.MemberPass) error
}

var _ Store = (*store.Store)(nil)

// Status is what the judge reports about itself.
type Status struct {
	LastSuccess time.Time // end of the last pass without error
	Passes      uint64    // passes completed without error
	Failures    uint64    // passes that failed
	Intervals   uint64    // agent intervals judged
	Named       uint64    // members named slow
	Cleared     uint64    // members cleared
}

// Judge owns the members' states on the elected replica. Pass and Run
// must not be called concurrently.
type Judge struct {
	st   Store
	opts Options

	loaded bool
	states map[store.MemberKey]*store.MemberState

	mu     sync.Mutex
	status Status
}

// New returns a judge over st.
func New(st Store, opts Options) *Judge {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Config = opts.Config.withDefaults()
	return &Judge{st: st, opts: opts}
}

// Run passes every Interval until ctx (the term) is done. Each call loads
// the states as the store holds them (a previous leader's).
func (j *Judge) Run(ctx context.Context) {
	j.loaded = false
	t := time.NewTicker(j.opts.Interval)
	defer t.Stop()
	for {
		n, err := j.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			j.opts.Logger.Error("member pass failed", "err", err)
		case n > 0:
			j.opts.Logger.Debug("member pass", "intervals", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Status returns the judge's counters.
func (j *Judge) Status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status
}

// Pass judges every pending interval and returns how many it judged. A
// pass that fails writes nothing, and the next one starts again from the
// states the store holds.
func (j *Judge) Pass(ctx context.Context) (int, error) {
	total := 0
	var named, cleared int
	for {
		n, nm, cl, err := j.pass(ctx)
		total, named, cleared = total+n, named+nm, cleared+cl
		if err != nil {
			j.loaded = false
			j.record(total, 0, 0, err)
			return total, err
		}
		if n < j.opts.BatchSize {
			break
		}
	}
	j.record(total, named, cleared, nil)
	return total, nil
}

func (j *Judge) record(n, named, cleared int, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.status.Failures++
		return
	}
	j.status.Intervals += uint64(n)
	j.status.Named += uint64(named)
	j.status.Cleared += uint64(cleared)
	j.status.Passes++
	j.status.LastSuccess = time.Now()
}

func (j *Judge) load(ctx context.Context) error {
	all, err := j.st.ListMemberStates(ctx)
	if err != nil {
		return err
	}
	j.states = make(map[store.MemberKey]*store.MemberState, len(all))
	for i := range all {
		m := &all[i]
		j.states[store.MemberKey{AgentID: m.AgentID, GroupDevice: m.GroupDevice, Device: m.Device}] = m
	}
	j.loaded = true
	return nil
}

// pass judges one batch of intervals and saves it.
func (j *Judge) pass(ctx context.Context) (n, named, cleared int, err error) {
	if !j.loaded {
		if err := j.load(ctx); err != nil {
			return 0, 0, 0, fmt.Errorf("member states: %w", err)
		}
	}
	pending, err := j.st.PendingMemberIO(ctx, j.opts.BatchSize)
	if err != nil {
		return 0, 0, 0, err
	}
	p := store.MemberPass{Watermarks: map[string]uint64{}}
	touched := map[store.MemberKey]bool{}
	latest := map[string]time.Time{} // per agent
	inventory := map[string]bool{}   // agents with a slow member before or after
	for _, iv := range pending {
		p.Watermarks[iv.AgentID] = iv.Sequence
		end := iv.StartedAt.Add(iv.Interval)
		latest[iv.AgentID] = maxTime(latest[iv.AgentID], end)
		for _, g := range iv.Groups {
			for k, v := range JudgeGroup(j.opts.Config, iv.Interval, g) {
				key := store.MemberKey{AgentID: iv.AgentID, GroupDevice: g.Device, Device: v.Device}
				st := j.state(key, g, g.Members[k])
				inventory[key.AgentID] = inventory[key.AgentID] || st.Slow
				if Observe(j.opts.Config, st, v, iv.StartedAt, end) {
					if st.Slow {
						named++
					} else {
						cleared++
					}
				}
				touched[key] = true
				inventory[key.AgentID] = inventory[key.AgentID] || st.Slow
			}
		}
	}
	// Forget the members their agent has not reported for Stale (by the
	// agent's newest interval, not the server's clock: an agent that stops
	// sending keeps its members' states, and a replay judges its own time).
	for key, st := range j.states {
		if l, ok := latest[key.AgentID]; ok && l.Sub(st.Last) >= j.opts.Config.Stale {
			p.Removed = append(p.Removed, key)
			delete(touched, key)
			inventory[key.AgentID] = inventory[key.AgentID] || st.Slow
		}
	}
	for key := range touched {
		p.States = append(p.States, *j.states[key])
	}
	slices.SortFunc(p.States, func(a, b store.MemberState) int { return cmpKey(keyOf(a), keyOf(b)) })
	slices.SortFunc(p.Removed, cmpKey)
	for a, ok := range inventory {
		if ok {
			p.Inventory = append(p.Inventory, a)
		}
	}
	slices.Sort(p.Inventory)
	if len(pending) == 0 && len(p.Removed) == 0 {
		return 0, 0, 0, nil
	}
	if err := j.st.SaveMemberPass(ctx, p); err != nil {
		return 0, 0, 0, err
	}
	for _, key := range p.Removed {
		delete(j.states, key)
	}
	return len(pending), named, cleared, nil
}

// state is the member's state, made when first seen, with its identity
// as the group and member say now.
func (j *Judge) state(key store.MemberKey, g store.MemberGroup, c store.MemberCounters) *store.MemberState {
	st := j.states[key]
	if st == nil {
		st = &store.MemberState{AgentID: key.AgentID, GroupDevice: key.GroupDevice, Device: key.Device}
		j.states[key] = st
	}
	st.GroupKind, st.MountPoints, st.ByID, st.Serial = g.Kind, g.MountPoints, c.ByID, c.Serial
	return st
}

func keyOf(m store.MemberState) store.MemberKey {
	return store.MemberKey{AgentID: m.AgentID, GroupDevice: m.GroupDevice, Device: m.Device}
}

func cmpKey(a, b store.MemberKey) int {
	switch {
	case a.AgentID != b.AgentID:
		return strings.Compare(a.AgentID, b.AgentID)
	case a.GroupDevice != b.GroupDevice:
		return strings.Compare(a.GroupDevice, b.GroupDevice)
	}
	return strings.Compare(a.Device, b.Device)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
