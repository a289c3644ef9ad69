package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RecordKind says what a record carries.
type RecordKind string

const (
	KindGeometry RecordKind = "geometry"
	KindProbe    RecordKind = "probe"
	// KindRejected is a record the server refused; it is kept (payload and
	// reason) so that a replay is recognised and the high-water mark moves on.
	KindRejected RecordKind = "rejected"
)

// Record is one record as the server received it, with the columns the
// store keeps for queries.
type Record struct {
	Sequence   uint64
	Kind       RecordKind
	ProducedAt time.Time
	// Payload is the serialised plumbline.v1.Record, with only the fields
	// the server knows (ingest drops unknown ones); of a KindRejected
	// record, only its first bytes (ingest.MaxRejectedPayloadBytes).
	Payload []byte
	// Reason says why a KindRejected record was refused.
	Reason string
	// Volumes (KindGeometry) are every volume of the snapshot, with the
	// server's verdict. A volume of this agent missing from them is marked
	// gone (unless a newer snapshot is already stored).
	Volumes []Volume
	// Probe (KindProbe) is the probe result.
	Probe *ProbeResult
	// Database (KindDatabase) is the database I/O interval.
	Database *DatabaseIO
	// GeometryDigest (KindGeometry) is the digest the agent gave with the
	// snapshot, as text; once the snapshot is applied it is what Hello
	// reports as the geometry the server holds.
	GeometryDigest string
	// MemberIO (KindMemberIO) is the interval of member I/O.
	MemberIO *MemberIO
}

// ProbeResult is one probe run.
type ProbeResult struct {
	MountPoint     string
	Device         string
	Kind           string // random-read, random-write, log-write
	BlockSizeBytes uint32
	QueueDepth     uint32
	StartedAt      time.Time
	Duration       time.Duration
	Ops            uint64
	Errors         uint64
	Bytes          uint64
	Skipped        bool
	StoppedReason  string
	// Failure is the agent's message for a run that never ran (stopped
	// reason refused, failed, lock-timeout); empty otherwise.
	Failure string
	// Histogram is the plumbline.v1.Histogram of the latency.
	Histogram []byte
	// IOPSCap is the run's IOPS cap (0: uncapped).
	IOPSCap float64
	// StripeScan is the plumbline.v1.StripeScan of a stripe-scan run; nil
	// for every other kind.
	StripeScan []byte
	// ArrayActivity are the md arrays under the volume that ran a sync
	// action at the run's start or end (probe_arrays.go); nil when none.
	ArrayActivity []ArrayActivity
	// BusyIO is what the device did in the busy guard's window before the
	// run (plumbline.v1.DeviceActivity); Window 0: not reported.
	BusyIO DeviceActivity
}

// DeviceActivity is one device's diskstats deltas over a window: reads
// and writes completed, their 512-byte sectors, io_ticks and
// time_in_queue.
type DeviceActivity struct {
	Window, IOTicks, TimeInQueue time.Duration
	IOs, Sectors                 uint64
}

// AppendResult says what AppendBatch did with each record.
type AppendResult struct {
	// Stored are the sequences stored by this call, ascending.
	Stored []uint64
	// Duplicates are the sequences that were already stored (replays), ascending.
	Duplicates []uint64
	// HighWater is the dedup high-water mark of the batch's incarnation
	// after the batch.
	HighWater uint64
	// IdentityConflict: the batch came from an incarnation that a newer
	// one had superseded (see Agent.IdentityConflicts). It is stored all
	// the same.
	IdentityConflict bool
	// QuotaRefused: the batch's new records would have taken the agent
	// past its Quota; none was stored (Stored is empty) and the refusal
	// is counted (Agent.QuotaRefusals).
	QuotaRefused bool
}

// rowsPerInsert bounds one multi-row INSERT: 100 rows × at most 16
// columns stays far below both engines' placeholder limits.
const rowsPerInsert = 100

// recordRowsPerInsert is rowsPerInsert for the records and probe results
// of AppendBatch. On SQLite it is 32: the modernc driver binds each
// placeholder by scanning the arguments (quadratic in their number) and
// parses a statement at every execution, so mid-sized statements cost
// least per row.
func (s *Store) recordRowsPerInsert() int {
	if s.engine == SQLite {
		return 32
	}
	return rowsPerInsert
}

// AppendBatch stores a batch of records of one agent in one transaction:
// either every new record (with its volumes and probe result) is stored,
// or — on any error — nothing is. Records already stored (same agent,
// incarnation and sequence) are recognised as duplicates and left as they
// are. AppendBatch is AppendBatchFrom for the legacy incarnation "" with
// no first sequence. Concurrent
// batches of one agent, also from several server replicas, are serialised
// on the agent's row, so each record is stored exactly once.
//
// Concurrent batches (of any agents) share one transaction (group commit,
// group.go); each call still returns only after that transaction is
// committed, and a batch that fails leaves the others of its group
// unaffected.
//
// The agent must be registered (ErrUnknownAgent otherwise).
func (s *Store) AppendBatch(ctx context.Context, agentID string, records []Record) (AppendResult, error) {
	return s.AppendBatchFrom(ctx, agentID, "", 0, records)
}

// AppendBatchFrom stores a batch of one incarnation of an agent (the
// records' Sequence is the agent's, within the incarnation) and settles
// the incarnation's sequences below first (SettleBelow), in one
// transaction: an agent's report (ReportRequest.first_sequence and its
// records) costs one commit. first 0 means "not stated".
//
// Each record stored gets the next server sequence of the agent (the
// records.sequence column, which volumes, probe results and the baseline
// and inventory marks refer to), in the batch's order: server sequences
// follow arrival and have no gaps.
func (s *Store) AppendBatchFrom(ctx context.Context, agentID, incarnation string, first uint64, records []Record) (AppendResult, error) {
	return s.AppendBatchQuota(ctx, agentID, incarnation, first, records, Quota{})
}

// AppendBatchQuota is AppendBatchFrom within the agent's quota: a batch
// whose new records would take the agent past q is not stored at all
// (AppendResult.QuotaRefused; the high-water mark does not move).
func (s *Store) AppendBatchQuota(ctx context.Context, agentID, incarnation string, first uint64, records []Record, q Quota) (AppendResult, error) {
	if len(incarnation) > MaxIncarnationBytes {
		return AppendResult{}, fmt.Errorf("append batch for %q: %w: incarnation of %d bytes", agentID, ErrInvalid, len(incarnation))
	}
	if first > math.MaxInt64 {
		return AppendResult{}, fmt.Errorf("append batch for %q: %w: first sequence %d above 2^63-1", agentID, ErrInvalid, first)
	}
	recs, err := sortedBatch(records)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append batch for %q: %w", agentID, err)
	}
	var res AppendResult
	err = s.write(ctx, agentID, func(ctx context.Context, tx *sql.Tx) error {
		res = AppendResult{}
		lk, err := s.lockAgent(ctx, tx, agentID)
		if err != nil {
			return err
		}
		cur, existed, err := s.touchIncarnation(ctx, tx, agentID, incarnation)
		if err != nil {
			return err
		}
		if superseded(incarnation, existed, lk.incarnation) {
			// A superseded incarnation is still sending: two agents on one
			// identity. Its records are its own (no loss, no double count).
			// It is the current incarnation again, as at a Hello: its next
			// batch is no conflict unless the other one spoke since, so
			// the count stops once the other agent has stopped.
			res.IdentityConflict = true
			if err := s.countConflict(ctx, tx, agentID); err != nil {
				return err
			}
			if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET incarnation = ? WHERE agent_id = ?`), incarnation, agentID); err != nil {
				return fmt.Errorf("incarnation: %w", err)
			}
		}
		start := cur
		if first > 0 && first-1 > start {
			start = first - 1
		}
		if len(recs) > 0 {
			if err := s.storeBatch(ctx, tx, agentID, incarnation, lk.serverSeq, cur, recs, q, &res); err != nil {
				return err
			}
		}
		if res.QuotaRefused || len(res.Stored) == 0 && start == cur {
			res.HighWater = cur
			return nil
		}
		res.HighWater, err = s.advanceHighWater(ctx, tx, agentID, incarnation, cur, start)
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("append batch for %q: %w", agentID, err)
	}
	return res, nil
}

// storeBatch stores the records of recs that the incarnation has not
// stored yet, numbered with the agent's next server sequences after
// serverSeq, and moves agents.high_water to the last one. A sequence at
// or below the incarnation's pruned_through is a duplicate without its row
// (retention.go); only a batch reaching down to the high-water mark cur (a
// replay) reads it.
func (s *Store) storeBatch(ctx context.Context, tx *sql.Tx, agentID, incarnation string, serverSeq, cur uint64, recs []*Record, q Quota, res *AppendResult) error {
	have, err := s.storedSequences(ctx, tx, agentID, incarnation, recs[0].Sequence, recs[len(recs)-1].Sequence)
	if err != nil {
		return err
	}
	var pruned uint64
	if recs[0].Sequence <= cur {
		if pruned, err = s.prunedThrough(ctx, tx, agentID, incarnation); err != nil {
			return err
		}
	}
	var fresh []stored
	for _, r := range recs {
		if have[r.Sequence] || r.Sequence <= pruned {
			res.Duplicates = append(res.Duplicates, r.Sequence)
			continue
		}
		serverSeq++
		fresh = append(fresh, stored{Record: r, server: serverSeq})
		res.Stored = append(res.Stored, r.Sequence)
	}
	if len(fresh) == 0 {
		return nil
	}
	if ok, err := s.chargeQuota(ctx, tx, agentID, fresh, q); err != nil || !ok {
		res.Stored, res.QuotaRefused = nil, !ok
		return err
	}
	if err := s.insertRecords(ctx, tx, agentID, incarnation, fresh); err != nil {
		return err
	}
	var probes, members, dbs []stored
	for _, r := range fresh {
		switch r.Kind {
		case KindProbe:
			probes = append(probes, r)
		case KindMemberIO:
			members = append(members, r)
		case KindDatabase:
			dbs = append(dbs, r)
		case KindGeometry:
			// In sequence order, so the newest snapshot wins within the batch too.
			if err := s.putGeometry(ctx, tx, agentID, incarnation, r); err != nil {
				return err
			}
		}
	}
	if err := s.insertProbes(ctx, tx, agentID, probes); err != nil {
		return err
	}
	if err := s.insertMemberIO(ctx, tx, agentID, members); err != nil {
		return err
	}
	if err := s.insertDatabase(ctx, tx, agentID, dbs); err != nil {
		return err
	}
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET high_water = ? WHERE agent_id = ?`), int64(serverSeq), agentID); err != nil {
		return fmt.Errorf("server sequence: %w", err)
	}
	return nil
}

// stored is a record of a batch with the server sequence it is stored under.
type stored struct {
	*Record
	server uint64
}

// storedSequences returns which agent sequences from..to of the
// incarnation are stored.
func (s *Store) storedSequences(ctx context.Context, tx *sql.Tx, agentID, incarnation string, from, to uint64) (map[uint64]bool, error) {
	rows, err := s.txQuery(ctx, tx, s.q(`SELECT agent_sequence FROM records
WHERE agent_id = ? AND incarnation = ? AND agent_sequence >= ? AND agent_sequence <= ?`), agentID, incarnation, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("dedup: %w", err)
	}
	defer rows.Close()
	have := map[uint64]bool{}
	for rows.Next() {
		var q int64
		if err := rows.Scan(&q); err != nil {
			return nil, fmt.Errorf("dedup: %w", err)
		}
		have[uint64(q)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dedup: %w", err)
	}
	return have, nil
}

// sortedBatch validates a batch and returns it in ascending sequence order.
func sortedBatch(records []Record) ([]*Record, error) {
	recs := make([]*Record, len(records))
	for i := range records {
		r := &records[i]
		if r.Sequence == 0 || r.Sequence > math.MaxInt64 {
			return nil, fmt.Errorf("%w: sequence %d: want 1 to 2^63-1", ErrInvalid, r.Sequence)
		}
		switch r.Kind {
		case KindGeometry, KindProbe, KindRejected, KindMemberIO, KindDatabase:
		default:
			return nil, fmt.Errorf("%w: sequence %d: record kind %q", ErrInvalid, r.Sequence, r.Kind)
		}
		if (r.Kind == KindProbe) != (r.Probe != nil) {
			return nil, fmt.Errorf("%w: sequence %d: a probe result goes with kind %q and only with it", ErrInvalid, r.Sequence, KindProbe)
		}
		if (r.Kind == KindMemberIO) != (r.MemberIO != nil) {
			return nil, fmt.Errorf("%w: sequence %d: member io goes with kind %q and only with it", ErrInvalid, r.Sequence, KindMemberIO)
		}
		if m := r.MemberIO; m != nil {
			if err := checkMemberIO(m); err != nil {
				return nil, fmt.Errorf("%w: sequence %d: %w", ErrInvalid, r.Sequence, err)
			}
		}
		if err := checkDatabase(r); err != nil {
			return nil, err
		}
		if r.Kind != KindGeometry && len(r.Volumes) > 0 {
			return nil, fmt.Errorf("%w: sequence %d: volumes go with kind %q only", ErrInvalid, r.Sequence, KindGeometry)
		}
		if p := r.Probe; p != nil && (p.Ops > math.MaxInt64 || p.Errors > math.MaxInt64 || p.Bytes > math.MaxInt64) {
			return nil, fmt.Errorf("%w: sequence %d: probe counters above 2^63-1", ErrInvalid, r.Sequence)
		}
		for _, v := range r.Volumes {
			if v.StripeUnitBytes > math.MaxInt64 || (v.DataOffsetBytes != nil && *v.DataOffsetBytes > math.MaxInt64) {
				return nil, fmt.Errorf("%w: sequence %d: volume %q: sizes above 2^63-1", ErrInvalid, r.Sequence, v.MountPoint)
			}
		}
		recs[i] = r
	}
	slices.SortFunc(recs, func(a, b *Record) int { return cmpUint64(a.Sequence, b.Sequence) })
	for i := 1; i < len(recs); i++ {
		if recs[i].Sequence == recs[i-1].Sequence {
			return nil, fmt.Errorf("%w: sequence %d twice in one batch", ErrInvalid, recs[i].Sequence)
		}
	}
	return recs, nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// inTx runs fn in a transaction and commits it, or rolls it back when fn
// or the commit fails. On SQLite the transaction is a group commit's
// (group.go): every write of the Store queues in the same line, so none
// starves polling for the write lock while batches are committed back to
// back; fn's changes are still committed, or undone, as a whole. On
// PostgreSQL fn has a transaction of its own (only the agents' writes,
// through write, are grouped there).
//
// A fenced ctx (WithFence) makes the transaction check its lease epoch first.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	write := fn
	if f, ok := FenceFrom(ctx); ok {
		fn = func(tx *sql.Tx) error {
			if err := s.checkFence(ctx, tx, f); err != nil {
				return err
			}
			return write(tx)
		}
	} else if s.engine == Postgres {
		fn = func(tx *sql.Tx) error {
			if err := s.boundIdle(ctx, tx); err != nil {
				return err
			}
			return write(tx)
		}
	}
	if s.group != nil && s.engine == SQLite {
		return s.group.do(ctx, "", func(_ context.Context, tx *sql.Tx) error { return fn(tx) })
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// boundIdle makes PostgreSQL end the session of tx if it is left idle
// for s.idleInTx (txIdleTimeout): a paused replica's transaction then
// releases its row locks.
func (s *Store) boundIdle(ctx context.Context, tx *sql.Tx) error {
	if s.engine != Postgres || s.idleInTx <= 0 {
		return nil
	}
	ms := strconv.FormatInt(s.idleInTx.Milliseconds(), 10)
	if _, err := tx.ExecContext(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, ms); err != nil {
		return fmt.Errorf("idle timeout: %w", err)
	}
	return nil
}

// agentLock is what lockAgent read from the agent's row.
type agentLock struct {
	serverSeq   uint64 // the last server sequence given (agents.high_water)
	incarnation string // the current incarnation
	digest      string // the geometry digest the server holds
}

// lockAgent takes the agent's row lock for the rest of the transaction (an
// UPDATE locks the row in PostgreSQL; SQLite transactions hold the write
// lock from BEGIN), moves its last-seen time forward to now, and returns
// what the row says.
func (s *Store) lockAgent(ctx context.Context, tx *sql.Tx, agentID string) (agentLock, error) {
	var lk agentLock
	var seq int64
	now := unixNano(s.now())
	err := s.txQueryRow(ctx, tx, s.q(`UPDATE agents SET last_seen_ns = CASE WHEN last_seen_ns < ? THEN ? ELSE last_seen_ns END
WHERE agent_id = ? RETURNING high_water, incarnation, geometry_digest`), now, now, agentID).Scan(&seq, &lk.incarnation, &lk.digest)
	if errors.Is(err, sql.ErrNoRows) {
		return lk, ErrUnknownAgent
	}
	if err != nil {
		return lk, fmt.Errorf("lock agent: %w", err)
	}
	lk.serverSeq = uint64(seq)
	return lk, nil
}

// advanceHighWater moves the incarnation's mark from start over every
// contiguous stored agent sequence above it and saves it when it moved
// past cur.
func (s *Store) advanceHighWater(ctx context.Context, tx *sql.Tx, agentID, incarnation string, cur, start uint64) (uint64, error) {
	hw := start
	const page = 1000
	for {
		rows, err := s.txQuery(ctx, tx, s.q(`SELECT agent_sequence FROM records WHERE agent_id = ? AND incarnation = ? AND agent_sequence > ?
ORDER BY agent_sequence LIMIT `+fmt.Sprint(page)), agentID, incarnation, int64(hw))
		if err != nil {
			return 0, fmt.Errorf("high water: %w", err)
		}
		n, gap := 0, false
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return 0, fmt.Errorf("high water: %w", err)
			}
			n++
			if uint64(seq) != hw+1 {
				gap = true
				break
			}
			hw++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("high water: %w", err)
		}
		if gap || n < page {
			break
		}
	}
	if hw != cur {
		if _, err := s.txExec(ctx, tx, s.q(`UPDATE agent_incarnations SET high_water = ? WHERE agent_id = ? AND incarnation = ?`),
			int64(hw), agentID, incarnation); err != nil {
			return 0, fmt.Errorf("high water: %w", err)
		}
	}
	return hw, nil
}

// insertRecords inserts records in multi-row INSERTs, each under its
// server sequence.
func (s *Store) insertRecords(ctx context.Context, tx *sql.Tx, agentID, incarnation string, recs []stored) error {
	received := unixNano(s.now())
	for chunk := range slices.Chunk(recs, s.recordRowsPerInsert()) {
		var b strings.Builder
		b.WriteString(insertRecordSQL)
		args := make([]any, 0, len(chunk)*9)
		b.WriteString(tupleList("(?, ?, ?, ?, ?, ?, ?, ?, ?)", len(chunk)))
		for _, r := range chunk {
			payload := r.Payload
			if payload == nil {
				payload = []byte{}
			}
			args = append(args, agentID, int64(r.server), incarnation, int64(r.Sequence), string(r.Kind), unixNano(r.ProducedAt), received, payload, r.Reason)
		}
		if _, err := s.txExec(ctx, tx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("insert records: %w", err)
		}
	}
	return nil
}

const (
	insertRecordSQL = `INSERT INTO records (agent_id, sequence, incarnation, agent_sequence, kind, produced_ns, received_ns, payload, reason) VALUES `
	insertProbeSQL  = `INSERT INTO probe_results (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, failure, latency_histogram, iops_cap, stripe_scan, array_activity,
    busy_window_ns, busy_ios, busy_sectors, busy_ticks_ns, busy_queue_ns) VALUES `
	probeRowSQL = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

func probeArgs(args []any, agentID string, r stored) []any {
	p := r.Probe
	hist := p.Histogram
	if hist == nil {
		hist = []byte{}
	}
	var scan any // NULL unless a stripe-scan answer
	if p.StripeScan != nil {
		scan = p.StripeScan
	}
	return append(args, agentID, int64(r.server), p.MountPoint, p.Device, p.Kind,
		int64(p.BlockSizeBytes), int64(p.QueueDepth), unixNano(p.StartedAt), int64(p.Duration),
		int64(p.Ops), int64(p.Errors), int64(p.Bytes), p.Skipped, p.StoppedReason, p.Failure, hist, p.IOPSCap, scan, encodeArrayActivity(p.ArrayActivity),
		int64(p.BusyIO.Window), int64(p.BusyIO.IOs), int64(p.BusyIO.Sectors), int64(p.BusyIO.IOTicks), int64(p.BusyIO.TimeInQueue))
}

func (s *Store) insertProbes(ctx context.Context, tx *sql.Tx, agentID string, probes []stored) error {
	for chunk := range slices.Chunk(probes, s.recordRowsPerInsert()) {
		var b strings.Builder
		b.WriteString(insertProbeSQL)
		args := make([]any, 0, len(chunk)*24)
		b.WriteString(tupleList(probeRowSQL, len(chunk)))
		for _, r := range chunk {
			args = probeArgs(args, agentID, r)
		}
		if _, err := s.txExec(ctx, tx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("insert probe results: %w", err)
		}
	}
	return nil
}

// agentColumns are an Agent's columns of agents a, in scanDest's order.
const agentColumns = `a.agent_id, a.hostname, a.os, a.kernel, a.machine_id, a.agent_version, a.first_seen_ns, a.last_seen_ns,
    COALESCE((SELECT i.high_water FROM agent_incarnations i WHERE i.agent_id = a.agent_id AND i.incarnation = a.incarnation), 0),
    a.incarnation, a.identity_conflicts, a.identity_conflict_ns, a.cert_not_before_ns, a.cert_not_after_ns, a.connected_ns,
    a.quota_day, a.quota_day_bytes, a.records_rejected, a.quota_refusals`
