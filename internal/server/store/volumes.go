package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Volume is the latest geometry of one volume.
type Volume struct {
	// AgentID and Hostname are filled by ListVolumes; AppendBatch takes
	// them from the batch's agent.
	AgentID    string
	Hostname   string
	MountPoint string
	Device     string
	FSType     string
	// Geometry is the plumbline.v1.Volume as received and validated,
	// without an alignment: the verdict is the judged record's alone.
	Geometry []byte
	// Judged is the volume's judged record (ingest's judge): AppendBatch
	// stores it as the volume's inventory row in the transaction that
	// stores the volume. ID, AgentID, MountPoint, Hostname, Sequence and
	// ObservedAt are the store's to set.
	Judged InventoryVolume
	// History is the volume's tracked fields (ingest's judge): the
	// geometry history compares them with the volume's in the agent's
	// previous snapshot, in the same transaction.
	History []HistoryField

	// Verdict, DataOffsetBytes, StripeUnitBytes and SplitFraction are
	// read from the judged record (ListVolumes): Verdict is aligned,
	// misaligned or unknown ("unknown" before the volume is judged).
	Verdict         string
	DataOffsetBytes *uint64 // nil when unknown
	StripeUnitBytes uint64
	// SplitFraction is the predicted split fraction of I/Os of each of
	// vocab.IOSizes; nil when no stripe unit is known.
	SplitFraction [vocab.NumIOSizes]*float64
	// Sequence and ObservedAt are those of the record that set the row
	// (filled by ListVolumes); Sequence is the server's sequence of the
	// record (records.sequence: the agent's records in arrival order).
	Sequence   uint64
	ObservedAt time.Time
	// JudgedAt is when the judged record was last written (filled by
	// ListVolumes; the zero time: not judged): a re-judge moves it on.
	JudgedAt time.Time
}

// putGeometry applies one full snapshot: its volumes replace older rows,
// with their judged records, and this agent's volumes that only older
// snapshots listed are marked gone (their judged records removed). The
// snapshot's history is folded first (every snapshot, in arrival order).
func (s *Store) putGeometry(ctx context.Context, tx *sql.Tx, agentID, incarnation string, r stored) error {
	if err := s.foldHistory(ctx, tx, agentID, r); err != nil {
		return fmt.Errorf("history of snapshot %d: %w", r.Sequence, err)
	}
	// A snapshot older than one of its incarnation already stored (a late
	// replay) is kept as a record but describes the past: it changes no
	// volume. Across incarnations the one stored last wins: a new
	// incarnation's snapshot is the host as it is now.
	var newer int
	if err := s.txQueryRow(ctx, tx, s.q(`SELECT COUNT(*) FROM (SELECT 1 FROM records
WHERE agent_id = ? AND incarnation = ? AND agent_sequence > ? AND kind = 'geometry' LIMIT 1) AS newer`),
		agentID, incarnation, int64(r.Sequence)).Scan(&newer); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	if newer > 0 {
		return nil
	}
	// Only what changes is written (a repeated snapshot, the common case,
	// has the same digest and the same volumes).
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET geometry_digest = ? WHERE agent_id = ? AND geometry_digest <> ?`),
		r.GeometryDigest, agentID, r.GeometryDigest); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	vols := slices.Clone(r.Volumes)
	slices.SortFunc(vols, func(a, b Volume) int { return strings.Compare(a.MountPoint, b.MountPoint) })
	if err := s.putVolumeRows(ctx, tx, agentID, r, vols); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	// The snapshot's volumes now have its sequence: the others are gone.
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE volumes SET present = FALSE WHERE agent_id = ? AND sequence < ? AND present`),
		agentID, int64(r.server)); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	if err := s.putSnapshotJudged(ctx, tx, agentID, r, vols); err != nil {
		return fmt.Errorf("judged volumes of snapshot %d: %w", r.Sequence, err)
	}
	return nil
}

// putVolumeRows upserts the volumes of snapshot r (sorted by mount
// point), rowsPerInsert a statement: an older row is replaced. Of a mount
// point listed twice the last stands.
func (s *Store) putVolumeRows(ctx context.Context, tx *sql.Tx, agentID string, r stored, vols []Volume) error {
	observed := unixNano(r.ProducedAt)
	rows := make([]Volume, 0, len(vols))
	for i, v := range vols {
		if i+1 < len(vols) && vols[i+1].MountPoint == v.MountPoint {
			continue
		}
		rows = append(rows, v)
	}
	for chunk := range slices.Chunk(rows, rowsPerInsert) {
		args := make([]any, 0, 7*len(chunk))
		for _, v := range chunk {
			geom := v.Geometry
			if geom == nil {
				geom = []byte{}
			}
			args = append(args, agentID, v.MountPoint, v.Device, v.FSType, int64(r.server), observed, geom)
		}
		if _, err := s.txExec(ctx, tx, s.q(`INSERT INTO volumes (agent_id, mount_point, device, fs_type, sequence, observed_ns, present, geometry)
VALUES `+tupleList("(?, ?, ?, ?, ?, ?, TRUE, ?)", len(chunk))+`
ON CONFLICT (agent_id, mount_point) DO UPDATE SET
    device = excluded.device, fs_type = excluded.fs_type, sequence = excluded.sequence,
    observed_ns = excluded.observed_ns, present = TRUE, geometry = excluded.geometry
WHERE volumes.sequence < excluded.sequence`), args...); err != nil {
			return err
		}
	}
	return nil
}

// ListVolumes returns the volumes the latest snapshot of each host lists,
// by hostname and mount point.
func (s *Store) ListVolumes(ctx context.Context) ([]Volume, error) {
	out, err := s.scanVolumes(ctx, `
SELECT `+volumeColumns+`
FROM volumes v JOIN agents a ON a.agent_id = v.agent_id
LEFT JOIN inventory_volumes f ON f.agent_id = v.agent_id AND f.mount_point = v.mount_point
WHERE v.present
ORDER BY a.hostname, v.agent_id, v.mount_point`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// volumeColumns are the columns scanVolumes reads, of volumes v joined
// with agents a and (left) with the judged record f.
var volumeColumns = `v.agent_id, a.hostname, v.mount_point, v.device, v.fs_type, v.sequence, v.observed_ns, v.geometry,
    COALESCE(f.verdict, 'unknown'), COALESCE(f.data_offset_bytes, -1), COALESCE(f.stripe_unit_bytes, 0), COALESCE(f.judged_ns, 0), ` +
	coalescedSizes("f", splitColumns)

// coalescedSizes are the per-size columns of alias, -1 where NULL.
func coalescedSizes(alias string, cols [vocab.NumIOSizes]string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = "COALESCE(" + alias + "." + c + ", -1)"
	}
	return strings.Join(out, ", ")
}

// scanVolumes runs a query whose columns are volumeColumns.
func (s *Store) scanVolumes(ctx context.Context, query string, args ...any) ([]Volume, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Volume
	for rows.Next() {
		var v Volume
		var seq, observed, offset, stripe, judged int64
		var split [vocab.NumIOSizes]float64
		dest := []any{&v.AgentID, &v.Hostname, &v.MountPoint, &v.Device, &v.FSType, &seq, &observed, &v.Geometry,
			&v.Verdict, &offset, &stripe, &judged}
		if err := rows.Scan(appendSizeDests(dest, &split)...); err != nil {
			return nil, err
		}
		v.Sequence, v.ObservedAt, v.StripeUnitBytes, v.JudgedAt = uint64(seq), fromUnixNano(observed), uint64(stripe), fromUnixNano(judged)
		if offset >= 0 {
			o := uint64(offset)
			v.DataOffsetBytes = &o
		}
		for i, f := range split {
			if f >= 0 {
				v.SplitFraction[i] = &f
			}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
