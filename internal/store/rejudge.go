package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
)

// rejudgePage is how many volume rows RejudgeVolumes reads at a time.
const rejudgePage = 500

// JudgeFunc re-evaluates one stored geometry (a plumbline.v1.Volume) with
// the server's current rules: the volume's geometry with the new
// alignment in it, and the columns derived from it.
type JudgeFunc func(geometry []byte) (Volume, error)

// RejudgeVolumes runs judge over every stored volume and rewrites the rows
// whose judged geometry differs from the stored one (a rule changed since
// they were stored), so that a rule change reaches volumes whose agents
// send no new snapshot. A row a newer snapshot replaced meanwhile is left
// alone; the inventory rows of rewritten volumes are derived again at the
// next sync. It returns how many rows it rewrote and how many geometries
// did not judge (left as they are). Idempotent, so replicas may all run it.
func (s *Store) RejudgeVolumes(ctx context.Context, judge JudgeFunc) (changed, failed int, err error) {
	var lastAgent, lastMount string
	first := true
	for {
		type row struct {
			agent, mount string
			seq          int64
			geom         []byte
		}
		var page []row
		err := func() error {
			query := `SELECT agent_id, mount_point, sequence, geometry FROM volumes`
			args := []any{}
			if !first {
				query += ` WHERE agent_id > ? OR (agent_id = ? AND mount_point > ?)`
				args = append(args, lastAgent, lastAgent, lastMount)
			}
			query += fmt.Sprintf(` ORDER BY agent_id, mount_point LIMIT %d`, rejudgePage)
			rows, err := s.db.QueryContext(ctx, s.q(query), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.agent, &r.mount, &r.seq, &r.geom); err != nil {
					return err
				}
				page = append(page, r)
			}
			return rows.Err()
		}()
		if err != nil {
			return changed, failed, fmt.Errorf("rejudge volumes: %w", err)
		}
		if len(page) == 0 {
			return changed, failed, nil
		}
		first = false
		lastAgent, lastMount = page[len(page)-1].agent, page[len(page)-1].mount

		type update struct {
			agent, mount string
			seq          int64
			v            Volume
		}
		var ups []update
		for _, r := range page {
			v, err := judge(r.geom)
			if err != nil {
				failed++
				continue
			}
			if !bytes.Equal(v.Geometry, r.geom) {
				ups = append(ups, update{r.agent, r.mount, r.seq, v})
			}
		}
		if len(ups) == 0 {
			continue
		}
		n := 0
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			n = 0
			for _, u := range ups {
				var offset any
				if u.v.DataOffsetBytes != nil {
					offset = int64(*u.v.DataOffsetBytes)
				}
				res, err := s.txExec(ctx, tx, s.q(`UPDATE volumes SET geometry = ?, verdict = ?, data_offset_bytes = ?,
    stripe_unit_bytes = ?, split_fraction_8k = ?, split_fraction_64k = ?
WHERE agent_id = ? AND mount_point = ? AND sequence = ?`),
					u.v.Geometry, u.v.Verdict, offset, int64(u.v.StripeUnitBytes), floatOrNil(u.v.SplitFraction8K), floatOrNil(u.v.SplitFraction64K),
					u.agent, u.mount, u.seq)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil || n == 0 {
					continue // a newer snapshot replaced it: judged on arrival
				}
				n++
				// A stored sequence of -1 never matches: the sync derives it again.
				if _, err := s.txExec(ctx, tx, s.q(`UPDATE inventory_volumes SET sequence = -1 WHERE agent_id = ? AND mount_point = ?`),
					u.agent, u.mount); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return changed, failed, fmt.Errorf("rejudge volumes: %w", err)
		}
		changed += n
	}
}
