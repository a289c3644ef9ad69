package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Quota bounds what one agent may store. The zero value stores without a
// bound.
type Quota struct {
	// MaxBytesPerDay is the most the agent's records may cost per UTC day
	// (RecordCost each); 0: no bound. A batch that would pass it is not
	// stored (AppendResult.QuotaRefused): the agent keeps it and retries.
	MaxBytesPerDay int64
}

// RowCost is what a record row costs beyond its payload and reason: its
// keys, times and index entries, roughly.
const RowCost = 128

// RecordCost is what a record counts against Quota.MaxBytesPerDay.
func RecordCost(r *Record) int64 {
	return int64(len(r.Payload)+len(r.Reason)) + RowCost
}

// dayOf is the UTC day number of t.
func dayOf(t time.Time) int64 { return t.Unix() / 86400 }

// chargeQuota adds the cost of fresh to the agent's count for today and
// reports whether it fits q (false: nothing is charged, and the refusal is
// counted). It also counts the rejected records of fresh.
func (s *Store) chargeQuota(ctx context.Context, tx *sql.Tx, agentID string, fresh []stored, q Quota) (bool, error) {
	var cost, rejected int64
	for _, r := range fresh {
		cost += RecordCost(r.Record)
		if r.Kind == KindRejected {
			rejected++
		}
	}
	today := dayOf(s.now())
	var day, used int64
	if err := s.txQueryRow(ctx, tx, s.q(`SELECT quota_day, quota_day_bytes FROM agents WHERE agent_id = ?`), agentID).Scan(&day, &used); err != nil {
		return false, fmt.Errorf("quota: %w", err)
	}
	if day != today {
		used = 0
	}
	if q.MaxBytesPerDay > 0 && used+cost > q.MaxBytesPerDay {
		if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET quota_refusals = quota_refusals + 1 WHERE agent_id = ?`), agentID); err != nil {
			return false, fmt.Errorf("quota: %w", err)
		}
		return false, nil
	}
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET quota_day = ?, quota_day_bytes = ?, records_rejected = records_rejected + ? WHERE agent_id = ?`),
		today, used+cost, rejected, agentID); err != nil {
		return false, fmt.Errorf("quota: %w", err)
	}
	return true, nil
}

// CountQuotaRefusal counts a batch of the agent refused before the store
// (by the record-rate quota). An unknown agent is not counted.
func (s *Store) CountQuotaRefusal(ctx context.Context, agentID string) error {
	err := s.write(ctx, agentID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET quota_refusals = quota_refusals + 1 WHERE agent_id = ?`), agentID)
		return err
	})
	if err != nil {
		return fmt.Errorf("count quota refusal of %q: %w", agentID, err)
	}
	return nil
}
