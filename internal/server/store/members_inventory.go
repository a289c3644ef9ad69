package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// SlowMember is a member the sibling judge names slow, as a volume row of
// the inventory shows it (stored as JSON in inventory_members).
type SlowMember struct {
	// Array is the group's device (md0, dm-3), Kind how its members are
	// siblings, Member the member's kernel name.
	Array  string   `json:"array"`
	Kind   string   `json:"kind"`
	Member string   `json:"member"`
	ByID   []string `json:"by_id"`
	Serial string   `json:"serial"`
	// Direction (read, write) and Ratio: its await over its siblings'
	// median, with both, in the last interval judged.
	Direction            string  `json:"direction"`
	Ratio                float64 `json:"ratio"`
	AwaitSeconds         float64 `json:"await_seconds"`
	SiblingsAwaitSeconds float64 `json:"siblings_await_seconds"`
	Utilisation          float64 `json:"utilisation"`
	SiblingsUtilisation  float64 `json:"siblings_utilisation"`
	// Since is when the streak that named it began; UpdatedAt the end of
	// the last interval judged.
	Since     time.Time `json:"since"`
	UpdatedAt time.Time `json:"updated_at"`
}

// writeInventoryMembers rewrites the inventory_members rows of agents from
// their slow members' states (in tx, after the states are written).
func (s *Store) writeInventoryMembers(ctx context.Context, tx *sql.Tx, agents []string) error {
	for _, a := range agents {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_members WHERE agent_id = ?`), a); err != nil {
			return fmt.Errorf("inventory members of %q: %w", a, err)
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT `+memberStateColumns+` FROM member_states WHERE agent_id = ? AND slow
ORDER BY group_device, device`), a)
		if err != nil {
			return fmt.Errorf("inventory members of %q: %w", a, err)
		}
		byMount := map[string][]SlowMember{}
		for rows.Next() {
			m, err := scanMemberState(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("inventory members of %q: %w", a, err)
			}
			for _, mp := range m.MountPoints {
				byMount[mp] = append(byMount[mp], SlowMember{Array: m.GroupDevice, Kind: m.GroupKind, Member: m.Device,
					ByID: m.ByID, Serial: m.Serial, Direction: m.Direction, Ratio: m.Ratio, AwaitSeconds: m.AwaitSeconds,
					SiblingsAwaitSeconds: m.SiblingsAwaitSeconds, Utilisation: m.Utilisation, SiblingsUtilisation: m.SiblingsUtilisation,
					Since: m.Since.UTC(), UpdatedAt: m.Last.UTC()})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("inventory members of %q: %w", a, err)
		}
		mounts := make([]string, 0, len(byMount))
		for mp := range byMount {
			mounts = append(mounts, mp)
		}
		slices.Sort(mounts)
		for _, mp := range mounts {
			doc, err := json.Marshal(byMount[mp])
			if err != nil {
				return fmt.Errorf("inventory members of %q: %w", a, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO inventory_members (agent_id, mount_point, slow_members) VALUES (?, ?, ?)`),
				a, mp, string(doc)); err != nil {
				return fmt.Errorf("inventory members of %q: %w", a, err)
			}
		}
	}
	return nil
}

// parseSlowMembers reads an inventory_members document; nil for none.
func parseSlowMembers(doc sql.NullString) ([]SlowMember, error) {
	if !doc.Valid || doc.String == "" {
		return nil, nil
	}
	var out []SlowMember
	if err := json.Unmarshal([]byte(doc.String), &out); err != nil {
		return nil, fmt.Errorf("slow members: %w", err)
	}
	return out, nil
}
