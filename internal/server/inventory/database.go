package inventory

import (
	"context"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Database is the database judge's state of a volume (the row's
// "database"): the worst of its operations (learning, ok, degraded, or
// not-measured when the database times none), and while one is degraded
// the attribution of the regression with its numbers.
type Database struct {
	State       string    `json:"state"`
	Attribution string    `json:"attribution"`
	Reason      string    `json:"reason"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func databaseJSON(d *store.DatabaseVolume) *Database {
	if d == nil {
		return nil
	}
	return &Database{State: d.State, Attribution: d.Attribution, Reason: d.Reason, UpdatedAt: d.UpdatedAt}
}

// DatabaseOp is one operation a database counts on the volume, as last
// judged (the detail's "database_io").
type DatabaseOp struct {
	Source string `json:"source"`
	Engine string `json:"engine"`
	Op     string `json:"op"`
	// Status is learning, ok, degraded or not-measured.
	Status string `json:"status"`
	// LatencySeconds is the last interval's Δtime/Δops; null when the
	// database does not time the operation (NotMeasured says why) or
	// counted none — never 0 for unknown.
	LatencySeconds       *float64  `json:"latency_seconds"`
	HistoryMedianSeconds *float64  `json:"history_median_seconds"`
	Ratio                float64   `json:"ratio"`
	OperationsPerSecond  float64   `json:"operations_per_second"`
	BytesPerSecond       float64   `json:"bytes_per_second"`
	NotMeasured          string    `json:"not_measured,omitempty"`
	Since                time.Time `json:"since"`
	IntervalEnd          time.Time `json:"interval_end"`
	Intervals            uint64    `json:"intervals"`
}

// DatabaseStore is what the detail reads of a volume's databases.
type DatabaseStore interface {
	DatabaseVolumeOf(ctx context.Context, agentID, mountPoint string) (store.DatabaseVolume, []store.DatabaseState, bool, error)
	DatabaseHistory(ctx context.Context, agentID, mountPoint string, since time.Time, limit int) ([]store.DatabaseRun, error)
}

// DatabaseInterval is one operation of one interval the database counted
// on the volume (the detail's "database_history"), its counter sets on the
// volume added up.
type DatabaseInterval struct {
	StartedAt       time.Time `json:"started_at"`
	IntervalSeconds float64   `json:"interval_seconds"`
	Source          string    `json:"source"`
	Op              string    `json:"op"`
	Count           uint64    `json:"count"`
	// LatencySeconds is Δtime/Δops; null when not measured or none counted.
	LatencySeconds *float64 `json:"latency_seconds"`
}

// databaseHistoryWindow and databaseHistoryRows bound the detail's
// history: the last hours, at most so many operation rows.
const (
	databaseHistoryWindow = 6 * time.Hour
	databaseHistoryRows   = 5000
)

// databaseHistory is the volume's database intervals of the last
// databaseHistoryWindow, oldest first; [] when none.
func (a *API) databaseHistory(ctx context.Context, v *store.InventoryVolume) ([]DatabaseInterval, error) {
	out := []DatabaseInterval{}
	st, ok := a.st.(DatabaseStore)
	if !ok {
		return out, nil
	}
	runs, err := st.DatabaseHistory(ctx, v.AgentID, v.MountPoint, time.Now().Add(-databaseHistoryWindow), databaseHistoryRows)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		type acc struct {
			count    uint64
			time     time.Duration
			measured bool
		}
		var order []string
		sums := map[string]*acc{}
		for _, o := range r.Ops {
			x := sums[o.Op]
			if x == nil {
				x = &acc{measured: true}
				sums[o.Op] = x
				order = append(order, o.Op)
			}
			x.count += o.Count
			x.time += o.Time
			x.measured = x.measured && (o.Measured || o.Count == 0)
		}
		for _, op := range order {
			x := sums[op]
			iv := DatabaseInterval{StartedAt: r.StartedAt, IntervalSeconds: r.Interval.Seconds(), Source: r.Source, Op: op, Count: x.count}
			if x.measured && x.count > 0 {
				l := x.time.Seconds() / float64(x.count)
				iv.LatencySeconds = &l
			}
			out = append(out, iv)
		}
	}
	return out, nil
}

var _ DatabaseStore = (*store.Store)(nil)

// databaseOps is a volume's database operations, [] when it has none.
func (a *API) databaseOps(ctx context.Context, v *store.InventoryVolume) ([]DatabaseOp, error) {
	out := []DatabaseOp{}
	st, ok := a.st.(DatabaseStore)
	if !ok {
		return out, nil
	}
	_, states, _, err := st.DatabaseVolumeOf(ctx, v.AgentID, v.MountPoint)
	if err != nil {
		return nil, err
	}
	for _, s := range states {
		o := DatabaseOp{Source: s.Source, Engine: s.Engine, Op: s.Op, Status: s.Status, Ratio: s.Ratio,
			OperationsPerSecond: s.OpsRate, BytesPerSecond: s.BytesRate, NotMeasured: s.NotMeasured,
			Since: s.Since, IntervalEnd: s.Last, Intervals: s.Intervals}
		if s.Status != vocab.DatabaseNotMeasured && s.Latency > 0 {
			o.LatencySeconds = &s.Latency
		}
		if s.HistoryMedian > 0 {
			o.HistoryMedianSeconds = &s.HistoryMedian
		}
		out = append(out, o)
	}
	return out, nil
}
