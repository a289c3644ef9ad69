package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// rejudgePage is how many volume rows RejudgeVolumes reads at a time.
const rejudgePage = 500

// JudgeFunc re-evaluates one stored geometry (a plumbline.v1.Volume) with
// the server's current rules and the volume's latest stripe-scan runs
// (newest first; nil when it has none): the volume's geometry with the new
// alignment in it, and the columns derived from it.
type JudgeFunc func(geometry []byte, scans []StripeScanRun) (Volume, error)

// RejudgeVolumes runs judge over every stored volume and rewrites the rows
// whose judged geometry differs from the stored one (a rule changed since
// they were stored), so that a rule change reaches volumes whose agents
// send no new snapshot. A row a newer snapshot replaced meanwhile is left
// alone; the inventory rows of rewritten volumes are derived again at the
// next sync. It returns how many rows it rewrote and how many geometries
// did not judge (left as they are). Idempotent, so replicas may all run it.
func (s *Store) RejudgeVolumes(ctx context.Context, judge JudgeFunc) (changed, failed int, err error) {
	scanned, err := s.scannedVolumes(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("rejudge volumes: %w", err)
	}
	var after *volumeKey
	for {
		page, err := s.volumeGeometries(ctx, after)
		if err != nil {
			return changed, failed, fmt.Errorf("rejudge volumes: %w", err)
		}
		if len(page) == 0 {
			return changed, failed, nil
		}
		after = &page[len(page)-1].volumeKey
		var ups []rejudged
		for _, r := range page {
			var scans []StripeScanRun
			if scanned[r.volumeKey] {
				runs, err := s.StripeScanRuns(ctx, r.agent, r.mount)
				if err != nil {
					return changed, failed, fmt.Errorf("rejudge volumes: %w", err)
				}
				scans = runs[r.mount]
			}
			v, err := judge(r.geom, scans)
			if err != nil {
				failed++
				continue
			}
			if !bytes.Equal(v.Geometry, r.geom) {
				ups = append(ups, rejudged{r, v})
			}
		}
		if len(ups) == 0 {
			continue
		}
		n, err := s.rewriteJudged(ctx, ups)
		if err != nil {
			return changed, failed, fmt.Errorf("rejudge volumes: %w", err)
		}
		changed += n
	}
}

// RejudgeVolume re-evaluates one stored volume as RejudgeVolumes does (a
// stripe-scan run of it arrived) and reports whether its row changed;
// false with no error when the volume has no row.
func (s *Store) RejudgeVolume(ctx context.Context, agentID, mountPoint string, judge JudgeFunc) (bool, error) {
	var r storedGeometry
	r.agent, r.mount = agentID, mountPoint
	err := s.db.QueryRowContext(ctx, s.q(`SELECT sequence, geometry FROM volumes WHERE agent_id = ? AND mount_point = ?`),
		agentID, mountPoint).Scan(&r.seq, &r.geom)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rejudge volume %s:%s: %w", agentID, mountPoint, err)
	}
	runs, err := s.StripeScanRuns(ctx, agentID, mountPoint)
	if err != nil {
		return false, fmt.Errorf("rejudge volume %s:%s: %w", agentID, mountPoint, err)
	}
	v, err := judge(r.geom, runs[mountPoint])
	if err != nil {
		return false, fmt.Errorf("rejudge volume %s:%s: %w", agentID, mountPoint, err)
	}
	if bytes.Equal(v.Geometry, r.geom) {
		return false, nil
	}
	n, err := s.rewriteJudged(ctx, []rejudged{{r, v}})
	if err != nil {
		return false, fmt.Errorf("rejudge volume %s:%s: %w", agentID, mountPoint, err)
	}
	return n > 0, nil
}

// volumeKey names a volume row.
type volumeKey struct{ agent, mount string }

// storedGeometry is a volume row's geometry and the sequence that set it.
type storedGeometry struct {
	volumeKey
	seq  int64
	geom []byte
}

// rejudged is a stored geometry and its judgement under today's rules.
type rejudged struct {
	storedGeometry
	v Volume
}

// volumeGeometries reads the next rejudgePage volume rows after the key
// (nil: from the first), in key order.
func (s *Store) volumeGeometries(ctx context.Context, after *volumeKey) ([]storedGeometry, error) {
	query := `SELECT agent_id, mount_point, sequence, geometry FROM volumes`
	var args []any
	if after != nil {
		query += ` WHERE agent_id > ? OR (agent_id = ? AND mount_point > ?)`
		args = append(args, after.agent, after.agent, after.mount)
	}
	query += fmt.Sprintf(` ORDER BY agent_id, mount_point LIMIT %d`, rejudgePage)
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []storedGeometry
	for rows.Next() {
		var r storedGeometry
		if err := rows.Scan(&r.agent, &r.mount, &r.seq, &r.geom); err != nil {
			return nil, err
		}
		page = append(page, r)
	}
	return page, rows.Err()
}

// rewriteJudged stores the judged geometries in one transaction and
// returns how many rows it rewrote: a row a newer snapshot replaced
// meanwhile (its sequence moved) is left alone, judged on arrival.
func (s *Store) rewriteJudged(ctx context.Context, ups []rejudged) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, u := range ups {
			var offset any
			if u.v.DataOffsetBytes != nil {
				offset = int64(*u.v.DataOffsetBytes)
			}
			args := append([]any{u.v.Geometry, u.v.Verdict, offset, int64(u.v.StripeUnitBytes)}, nullableSizes(u.v.SplitFraction)...)
			res, err := s.txExec(ctx, tx, s.q(rewriteJudgedSQL), append(args, u.agent, u.mount, u.seq)...)
			if err != nil {
				return err
			}
			if rows, err := res.RowsAffected(); err != nil || rows == 0 {
				continue
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
	return n, err
}

// rewriteJudgedSQL stores a judged geometry over the row it was judged
// from.
var rewriteJudgedSQL = `UPDATE volumes SET geometry = ?, verdict = ?, data_offset_bytes = ?,
    stripe_unit_bytes = ?, ` + strings.Join(splitColumns[:], " = ?, ") + ` = ?
WHERE agent_id = ? AND mount_point = ? AND sequence = ?`
