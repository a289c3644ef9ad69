package store

import (
	"context"
	"database/sql"
	"slices"
)

// The md arrays of inventory volumes (inventory_arrays, migration 00029)
// are written with the volumes' rows and removed with them.

// putArrays replaces the arrays of vols.
func (s *Store) putArrays(ctx context.Context, tx *sql.Tx, vols []InventoryVolume) error {
	for chunk := range slices.Chunk(vols, rowsPerInsert) {
		ids := make([]any, len(chunk))
		for i, v := range chunk {
			ids[i] = v.ID
		}
		if err := s.removeArrays(ctx, tx, ids); err != nil {
			return err
		}
	}
	var args []any
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, s.q(insertValues("inventory_arrays", []string{"volume_id", "device", "missing",
			"sync_action", "sync_done_sectors", "sync_total_sectors", "sync_speed_bps"}, n)+
			` ON CONFLICT (volume_id, device) DO NOTHING`), args...)
		args, n = args[:0], 0
		return err
	}
	for _, v := range vols {
		for _, a := range v.Arrays {
			args = append(args, v.ID, a.Device, a.Missing, a.Sync.Action, a.Sync.DoneSectors, a.Sync.TotalSectors, a.Sync.SpeedBytesPerSecond)
			if n++; n == rowsPerInsert {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// removeArrays removes the arrays of the volumes ids.
func (s *Store) removeArrays(ctx context.Context, tx *sql.Tx, ids []any) error {
	_, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_arrays WHERE volume_id IN (`+placeholders(len(ids))+`)`), ids...)
	return err
}
