package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The inventory tables (migration 00003) are the judged records of the
// present volumes: one narrow row per volume with every filter and sort
// column broken out, its findings and its page document. Ingest's judge
// makes them; AppendBatch and PutJudged write them (judged.go); the store
// does not read the wire format.

// ErrNotFound: no such volume or host.
var ErrNotFound = errors.New("not found")

// VolumeID is the stable id of an agent's volume: 16 hex digits of the
// SHA-256 of agent id and mount point. It never changes while the agent
// keeps its id and the volume its mount point.
func VolumeID(agentID, mountPoint string) string {
	h := sha256.New()
	h.Write([]byte(agentID))
	h.Write([]byte{0})
	h.Write([]byte(mountPoint))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// InventoryVolume is one row of the inventory: a present volume with its
// query columns. Sizes and fractions that are unknown are -1.
type InventoryVolume struct {
	ID         string
	AgentID    string
	MountPoint string
	Hostname   string
	Sequence   uint64
	ObservedAt time.Time
	Device     string
	FSType     string
	Verdict    string

	DataOffsetBytes     int64
	StripeUnitBytes     int64
	AllocationUnitBytes int64
	RAIDLevel           string
	Media               string
	Profile             string
	// Per I/O size (vocab.IOSizes order): SplitFraction is the
	// offset-caused split (-1: unknown); GranularitySplit the split at
	// any offset from the allocation grid (-1: unknown). See
	// plumbline.v1.Alignment.
	SplitFraction    [vocab.NumIOSizes]float64
	GranularitySplit [vocab.NumIOSizes]float64
	// StripeUnitSource is where the judged stripe unit came from ("" when
	// none is known); StripeUnitConfidence a stripe-scan measurement's
	// confidence (0: none). MeasuredSplitCost (with its interval) is the
	// measured extra latency of one split I/O and MeasuredPenalty (per
	// I/O size) that cost at the predicted split of each size, in seconds
	// (-1: not measured). See plumbline.v1.Alignment.
	StripeUnitSource                                               string
	StripeUnitConfidence                                           float64
	MeasuredSplitCost, MeasuredSplitCostLow, MeasuredSplitCostHigh float64
	MeasuredPenalty                                                [vocab.NumIOSizes]float64
	// Severity is the worst finding's severity ("none" without findings);
	// SeverityRank orders it: critical 3, warning 2, info 1, none 0.
	Severity     string
	SeverityRank int
	// Rules are the findings' rule ids, sorted, without repeats.
	Rules []string
	// Findings, worst first (set by the judge); on reads only the first
	// (TopFinding) is returned.
	Findings   []Finding
	TopFinding *Finding
	// Arrays are the md arrays below the volume (filled by SyncInventory's
	// caller; not returned on reads: see ListJudgedVolumes).
	Arrays []RAIDArray

	// Geometry is the stored plumbline.v1.Volume (reads with geometry only).
	Geometry []byte
	// Baseline is the evaluator's state, nil when there is none.
	Baseline *BaselineState
	// SlowMembers are the members below the volume the sibling judge names
	// slow (none: nil).
	SlowMembers []SlowMember
	// Database is the database judge's state of the volume, nil when no
	// database's files are on it.
	Database *DatabaseVolume

	// Doc is the volume's JSON document as a page lists it, without the
	// baseline: the judge renders it without where the volume lives
	// (agent_id, id, observed_at, sequence, host), which the store adds
	// when it writes it to inventory_docs; reads with WithDoc return it.
	// Empty when it could not be rendered.
	Doc []byte

	// RulesVersion names the rules the record was judged under (the judge
	// re-judges records of another version); JudgedAt is when (set by the
	// store on writes).
	RulesVersion string
	JudgedAt     time.Time
	// RulesEpoch is the number of the shipped rules the record was judged
	// under (align.RulesVersion): PutJudged never replaces a record of a
	// higher epoch.
	RulesEpoch int64
}

// Finding is one alignment finding of an inventory volume.
type Finding struct {
	Rule        string
	Severity    string
	Message     string
	Remediation string
}

// BaselineState is the evaluator's latest judgement of a volume's probe
// latencies.
type BaselineState struct {
	AgentID    string
	MountPoint string
	State      string
	Degraded   bool
	Reason     string
	UpdatedAt  time.Time
}

// SyncStats says what one SyncInventory did: rows renamed (Updated) and
// removed; Failed is always 0 (nothing is derived).
type SyncStats struct {
	Updated, Removed, Failed int
	// LastReceived is the latest receive time of a geometry record when
	// the sync began.
	LastReceived time.Time
}

// PutBaselineStates records the evaluator's latest state of volumes (one
// row per agent and mount point; a newer UpdatedAt replaces an older one).
// The inventory's `degraded` filter and the summary read them.
func (s *Store) PutBaselineStates(ctx context.Context, states []BaselineState) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, b := range states {
			_, err := tx.ExecContext(ctx, s.q(`
INSERT INTO inventory_baseline (agent_id, mount_point, state, degraded, reason, updated_ns) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point) DO UPDATE SET state = excluded.state, degraded = excluded.degraded,
    reason = excluded.reason, updated_ns = excluded.updated_ns
WHERE inventory_baseline.updated_ns <= excluded.updated_ns`),
				b.AgentID, b.MountPoint, b.State, b.Degraded, b.Reason, unixNano(b.UpdatedAt))
			if err != nil {
				return fmt.Errorf("put baseline state %s:%s: %w", b.AgentID, b.MountPoint, err)
			}
		}
		if len(states) == 0 {
			return nil
		}
		return bumpGeneration(ctx, tx)
	})
}

// bumpGeneration moves the inventory generation on, in the transaction
// that changes the inventory tables: a reader that saw generation g and
// sees it again has seen no change since.
func bumpGeneration(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE inventory_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("inventory generation: %w", err)
	}
	return nil
}

// InventoryGeneration returns the inventory generation: a counter that
// every change to the inventory tables (SyncInventory's writes and
// removals, PutBaselineStates) moves on in its own transaction, from any
// process sharing the database. Equal generations: equal contents.
func (s *Store) InventoryGeneration(ctx context.Context) (uint64, error) {
	var g int64
	if err := s.db.QueryRowContext(ctx, `SELECT generation FROM inventory_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("inventory generation: %w", err)
	}
	return uint64(g), nil
}
