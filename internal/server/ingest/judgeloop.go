package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// JudgeStore is what the judge reads and writes: stored geometries and
// stripe-scan runs in, judged records out.
type JudgeStore interface {
	GeometriesToJudge(ctx context.Context, version, afterAgent, afterMount string, limit int) ([]store.StoredGeometry, error)
	StoredGeometryOf(ctx context.Context, agentID, mountPoint string) (store.StoredGeometry, error)
	StripeScanRuns(ctx context.Context, agentID, mountPoint string) (map[string][]store.StripeScanRun, error)
	PutJudged(ctx context.Context, vols []store.Volume) (int, error)
	AnalyzeInventory(ctx context.Context) error
}

var _ JudgeStore = (*store.Store)(nil)

// JudgeOptions configure a Judge.
type JudgeOptions struct {
	// Rules are the rules to judge under at first (zero: the shipped ones).
	Rules Rules
	// Interval is how often Run looks for volumes judged under other rules
	// besides when SetRules changes them (default 5m): records another
	// replica wrote under its own rules, volumes stored without a judged
	// record.
	Interval time.Duration
	Logger   *slog.Logger
}

// judgePage is how many stored volumes one step of a pass judges (one
// transaction writes them).
const judgePage = 500

// analyzeAfter is how many records a pass rewrites before it refreshes
// the planners' statistics of the inventory tables.
const analyzeAfter = 5000

// Judge owns the judging of stored volumes: the rules in force (ingest
// judges every snapshot on arrival under them), the re-judging of a
// volume whose stripe-scan run arrived, and the loop (Run, on the elected
// replica) that judges again every record judged under other rules — at
// start, whenever SetRules changes the rules, and every Interval.
type Judge struct {
	st    JudgeStore
	opts  JudgeOptions
	rules atomic.Pointer[Rules]
	kick  chan struct{} // SetRules wakes Run
}

// NewJudge returns a judge over st; an override naming an unknown rule or
// severity is an error.
func NewJudge(st JudgeStore, opts JudgeOptions) (*Judge, error) {
	if err := opts.Rules.check(); err != nil {
		return nil, err
	}
	opts.Interval = cmp.Or(max(opts.Interval, 0), 5*time.Minute)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	j := &Judge{st: st, opts: opts, kick: make(chan struct{}, 1)}
	r := opts.Rules
	j.rules.Store(&r)
	return j, nil
}

// Rules are the rules in force.
func (j *Judge) Rules() Rules { return *j.rules.Load() }

// SetRules puts rules r in force in this process: snapshots that arrive
// from now on are judged under them, and Run judges every stored volume
// again (the API and /metrics follow without a restart). A configuration
// reload calls it.
func (j *Judge) SetRules(r Rules) error {
	if err := r.check(); err != nil {
		return err
	}
	j.rules.Store(&r)
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// Run judges again, until ctx is done, the stored volumes whose records
// were judged under other rules than those in force: now, after each
// SetRules and every Interval.
func (j *Judge) Run(ctx context.Context) {
	t := time.NewTicker(j.opts.Interval)
	defer t.Stop()
	for {
		start := time.Now()
		changed, failed, err := j.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			j.opts.Logger.Warn("judging stored volumes under the rules in force failed; they keep their verdicts until the next pass", "err", err)
		case changed > 0 || failed > 0:
			j.opts.Logger.Info("judged stored volumes under the rules in force", "rules", j.Rules().Version(),
				"changed", changed, "undecodable", failed, "took", time.Since(start).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-j.kick:
		case <-t.C:
		}
	}
}

// Pass judges every stored volume whose record was judged under other
// rules than those in force (or has none), in pages, and returns how many
// records it rewrote and how many geometries did not judge (left as they
// are). A volume a newer snapshot replaced meanwhile is left alone: it
// was judged on arrival.
func (j *Judge) Pass(ctx context.Context) (changed, failed int, err error) {
	r := j.Rules()
	version := r.Version()
	var agent, mount string
	for {
		page, err := j.st.GeometriesToJudge(ctx, version, agent, mount, judgePage)
		if err != nil || len(page) == 0 {
			return changed, failed, err
		}
		agent, mount = page[len(page)-1].AgentID, page[len(page)-1].MountPoint
		runs := map[string]map[string][]store.StripeScanRun{}
		var vols []store.Volume
		for _, g := range page {
			if _, ok := runs[g.AgentID]; !ok {
				if runs[g.AgentID], err = j.st.StripeScanRuns(ctx, g.AgentID, ""); err != nil {
					return changed, failed, err
				}
			}
			v, err := judgeStored(g, runs[g.AgentID][g.MountPoint], r)
			if err != nil {
				failed++
				continue
			}
			vols = append(vols, v)
		}
		n, err := j.st.PutJudged(ctx, vols)
		if err != nil {
			return changed, failed, err
		}
		if changed/analyzeAfter != (changed+n)/analyzeAfter {
			if err := j.st.AnalyzeInventory(ctx); err != nil {
				return changed + n, failed, err
			}
		}
		changed += n
	}
}

// Volume judges one stored volume again (a stripe-scan run of it
// arrived) and reports whether its record was rewritten; false with no
// error when the agent has no such present volume.
func (j *Judge) Volume(ctx context.Context, agentID, mountPoint string) (bool, error) {
	g, err := j.st.StoredGeometryOf(ctx, agentID, mountPoint)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	runs, err := j.st.StripeScanRuns(ctx, agentID, mountPoint)
	if err != nil {
		return false, err
	}
	v, err := judgeStored(g, runs[mountPoint], j.Rules())
	if err != nil {
		return false, fmt.Errorf("volume %s:%s: %w", agentID, mountPoint, err)
	}
	n, err := j.st.PutJudged(ctx, []store.Volume{v})
	return n > 0, err
}

// judgeStored judges a stored geometry with its stripe-scan runs (newest
// first) under r.
func judgeStored(g store.StoredGeometry, runs []store.StripeScanRun, r Rules) (store.Volume, error) {
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(g.Geometry, &pv); err != nil {
		return store.Volume{}, fmt.Errorf("stored geometry: %w", err)
	}
	v, err := judgeVolume(&pv, measuredStripe(runs), r)
	if err != nil {
		return store.Volume{}, err
	}
	v.AgentID, v.Sequence = g.AgentID, g.Sequence
	return v, nil
}
