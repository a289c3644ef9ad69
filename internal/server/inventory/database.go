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
