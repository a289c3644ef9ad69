package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
)

// foldHistory records what one geometry record changes in the agent's
// geometry history, in the transaction that stores it: each volume's
// tracked fields (Volume.History, from the judge) against its last state,
// a volume that appears or goes, and the new states and mark. Records are
// folded in the agent's server order (arrival), late replays included.
func (s *Store) foldHistory(ctx context.Context, tx *sql.Tx, agentID string, r stored) error {
	var mark int64
	err := s.txQueryRow(ctx, tx, s.q(`SELECT sequence FROM inventory_history_mark WHERE agent_id = ?`), agentID).Scan(&mark)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	states, err := s.historyStates(ctx, tx, agentID)
	if err != nil {
		return err
	}
	prev := map[string]map[string]string{}
	for mp, st := range states {
		var m map[string]string
		if st.State != "" && json.Unmarshal([]byte(st.State), &m) == nil {
			prev[mp] = m
		}
	}
	changed, changes := historyOf(prev, mark == 0, r)
	return s.putHistory(ctx, tx, agentID, r.server, changed, changes)
}

// historyOf folds record r into prev (each present volume's tracked
// state; first: no record has been folded yet): the volumes whose state
// changed and the changes.
func historyOf(prev map[string]map[string]string, first bool, r stored) (map[string]HistoryState, []VolumeChange) {
	changed := map[string]HistoryState{}
	var changes []VolumeChange
	at := func(mp, field, kind, old, new string) VolumeChange {
		return VolumeChange{MountPoint: mp, Sequence: r.server, ObservedAt: r.ProducedAt, Field: field, Kind: kind, Old: old, New: new}
	}
	seen := map[string]bool{}
	for _, v := range r.Volumes {
		mp := v.MountPoint
		seen[mp] = true
		cur := map[string]string{}
		for _, f := range v.History {
			if f.Value != "" {
				cur[f.Field] = f.Value
			}
		}
		old, had := prev[mp]
		switch {
		case !had && !first:
			changes = append(changes, at(mp, "volume", "appeared", "", mp))
		case had:
			for _, f := range v.History { // sorted by field
				if old[f.Field] != cur[f.Field] {
					changes = append(changes, at(mp, f.Field, f.Kind, old[f.Field], cur[f.Field]))
				}
			}
		}
		if !had || !maps.Equal(old, cur) {
			b, _ := json.Marshal(cur) // a map of strings always marshals
			changed[mp] = HistoryState{Sequence: r.server, State: string(b)}
		}
	}
	for mp := range prev {
		if !seen[mp] {
			changes = append(changes, at(mp, "volume", "removed", mp, ""))
			changed[mp] = HistoryState{Sequence: r.server}
		}
	}
	return changed, changes
}
