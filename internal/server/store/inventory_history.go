package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The geometry history of volumes is written with each geometry record, in
// the transaction that stores it (foldHistory): the judge gives each
// volume's tracked fields (Volume.History); the store compares them with
// the volume's last state and records what changed. Per agent a mark says
// up to which record the history goes (0: none yet: the first snapshot's
// volumes do not "appear"); per volume the last state is its tracked
// fields as JSON (field → value, unset fields left out).

// HistoryField is one tracked field of a volume in one snapshot: its
// name, the kind of change a new value makes (reformat, new-partition,
// ...) and its value ("" when unknown or absent). The judge lists every
// tracked field, set or not.
type HistoryField struct {
	Field, Kind, Value string
}

// VolumeChange is one changed field of a volume between two snapshots.
type VolumeChange struct {
	MountPoint string
	Sequence   uint64
	ObservedAt time.Time
	// Field is what changed (e.g. "filesystem.uuid"); Kind classifies the
	// change (reformat, repartition, cluster-change, ...).
	Field, Kind string
	Old, New    string
}

// HistoryState is the last seen state of one volume.
type HistoryState struct {
	Sequence uint64
	State    string
}

// historyStates returns the last seen state of each of the agent's
// volumes, by mount point.
func (s *Store) historyStates(ctx context.Context, tx *sql.Tx, agentID string) (map[string]HistoryState, error) {
	rows, err := s.txQuery(ctx, tx, s.q(`SELECT mount_point, sequence, state FROM inventory_history_state WHERE agent_id = ?`), agentID)
	if err != nil {
		return nil, fmt.Errorf("history states of %q: %w", agentID, err)
	}
	defer rows.Close()
	out := map[string]HistoryState{}
	for rows.Next() {
		var mp string
		var seq int64
		var st HistoryState
		if err := rows.Scan(&mp, &seq, &st.State); err != nil {
			return nil, fmt.Errorf("history states of %q: %w", agentID, err)
		}
		st.Sequence = uint64(seq)
		out[mp] = st
	}
	return out, rows.Err()
}

// putHistory stores what folding the agent's geometry records up to mark
// found: the volumes' new states and the changes. Concurrent writers are
// harmless: changes are keyed by volume, sequence and field, and a state
// or mark never moves backwards.
func (s *Store) putHistory(ctx context.Context, tx *sql.Tx, agentID string, mark uint64, states map[string]HistoryState, changes []VolumeChange) error {
	for chunk := range slices.Chunk(changes, rowsPerInsert) {
		args := make([]any, 0, 8*len(chunk))
		for _, c := range chunk {
			args = append(args, agentID, c.MountPoint, int64(c.Sequence), unixNano(c.ObservedAt), c.Field, c.Kind, c.Old, c.New)
		}
		if _, err := s.txExec(ctx, tx, s.q(insertValues("inventory_changes",
			[]string{"agent_id", "mount_point", "sequence", "observed_ns", "field", "kind", "old_value", "new_value"}, len(chunk))+`
ON CONFLICT (agent_id, mount_point, sequence, field) DO NOTHING`), args...); err != nil {
			return fmt.Errorf("put history of %q: %w", agentID, err)
		}
	}
	mounts := slices.Sorted(maps.Keys(states)) // one order: concurrent writers lock rows alike
	for chunk := range slices.Chunk(mounts, rowsPerInsert) {
		args := make([]any, 0, 4*len(chunk))
		for _, mp := range chunk {
			args = append(args, agentID, mp, int64(states[mp].Sequence), states[mp].State)
		}
		if _, err := s.txExec(ctx, tx, s.q(insertValues("inventory_history_state", []string{"agent_id", "mount_point", "sequence", "state"}, len(chunk))+`
ON CONFLICT (agent_id, mount_point) DO UPDATE SET sequence = excluded.sequence, state = excluded.state
WHERE inventory_history_state.sequence < excluded.sequence`), args...); err != nil {
			return fmt.Errorf("put history of %q: %w", agentID, err)
		}
	}
	if _, err := s.txExec(ctx, tx, s.q(`INSERT INTO inventory_history_mark (agent_id, sequence) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET sequence = excluded.sequence WHERE inventory_history_mark.sequence < excluded.sequence`),
		agentID, int64(mark)); err != nil {
		return fmt.Errorf("put history of %q: %w", agentID, err)
	}
	return nil
}

// VolumeChanges returns the recorded changes of a volume, oldest first.
func (s *Store) VolumeChanges(ctx context.Context, agentID, mountPoint string) ([]VolumeChange, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT sequence, observed_ns, field, kind, old_value, new_value FROM inventory_changes
WHERE agent_id = ? AND mount_point = ? ORDER BY sequence, field`), agentID, mountPoint)
	if err != nil {
		return nil, fmt.Errorf("changes of %s:%s: %w", agentID, mountPoint, err)
	}
	defer rows.Close()
	var out []VolumeChange
	for rows.Next() {
		c := VolumeChange{MountPoint: mountPoint}
		var seq, obs int64
		if err := rows.Scan(&seq, &obs, &c.Field, &c.Kind, &c.Old, &c.New); err != nil {
			return nil, fmt.Errorf("changes of %s:%s: %w", agentID, mountPoint, err)
		}
		c.Sequence, c.ObservedAt = uint64(seq), fromUnixNano(obs)
		out = append(out, c)
	}
	return out, rows.Err()
}
