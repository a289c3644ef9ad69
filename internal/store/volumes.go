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
	// Geometry is the plumbline.v1.Volume (with the server's Alignment).
	Geometry []byte
	// Verdict is aligned, misaligned or unknown.
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
}

// putGeometry applies one full snapshot: its volumes replace older rows,
// and this agent's volumes that only older snapshots listed are marked gone.
func (s *Store) putGeometry(ctx context.Context, tx *sql.Tx, agentID, incarnation string, r stored) error {
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
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET geometry_digest = ? WHERE agent_id = ?`), r.GeometryDigest, agentID); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE volumes SET present = FALSE WHERE agent_id = ? AND sequence < ?`),
		agentID, int64(r.server)); err != nil {
		return fmt.Errorf("volumes of snapshot %d: %w", r.Sequence, err)
	}
	vols := slices.Clone(r.Volumes)
	slices.SortFunc(vols, func(a, b Volume) int { return strings.Compare(a.MountPoint, b.MountPoint) })
	observed := unixNano(r.ProducedAt)
	for _, v := range vols {
		var offset any
		if v.DataOffsetBytes != nil {
			offset = int64(*v.DataOffsetBytes)
		}
		geom := v.Geometry
		if geom == nil {
			geom = []byte{}
		}
		args := append([]any{agentID, v.MountPoint, v.Device, v.FSType, int64(r.server), observed, geom,
			v.Verdict, offset, int64(v.StripeUnitBytes)}, nullableSizes(v.SplitFraction)...)
		_, err := s.txExec(ctx, tx, s.q(putVolumeSQL), args...)
		if err != nil {
			return fmt.Errorf("volume %q of snapshot %d: %w", v.MountPoint, r.Sequence, err)
		}
	}
	return nil
}

// putVolumeSQL upserts a volume of a snapshot: an older row is replaced.
var putVolumeSQL = func() string {
	set := make([]string, len(splitColumns))
	for i, c := range splitColumns {
		set[i] = c + " = excluded." + c
	}
	return `
INSERT INTO volumes (agent_id, mount_point, device, fs_type, sequence, observed_ns, present, geometry,
    verdict, data_offset_bytes, stripe_unit_bytes, ` + columnList("", splitColumns[:]...) + `)
VALUES (?, ?, ?, ?, ?, ?, TRUE, ?, ?, ?, ?, ` + placeholders(len(splitColumns)) + `)
ON CONFLICT (agent_id, mount_point) DO UPDATE SET
    device = excluded.device, fs_type = excluded.fs_type, sequence = excluded.sequence,
    observed_ns = excluded.observed_ns, present = TRUE, geometry = excluded.geometry,
    verdict = excluded.verdict, data_offset_bytes = excluded.data_offset_bytes,
    stripe_unit_bytes = excluded.stripe_unit_bytes, ` + strings.Join(set, ", ") + `
WHERE volumes.sequence < excluded.sequence`
}()

func floatOrNil(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// ListVolumes returns the volumes the latest snapshot of each host lists,
// by hostname and mount point.
func (s *Store) ListVolumes(ctx context.Context) ([]Volume, error) {
	out, err := s.scanVolumes(ctx, `
SELECT `+volumeColumns+`
FROM volumes v JOIN agents a ON a.agent_id = v.agent_id
WHERE v.present
ORDER BY a.hostname, v.agent_id, v.mount_point`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// volumeColumns are the columns scanVolumes reads, of volumes v joined
// with agents a.
var volumeColumns = `v.agent_id, a.hostname, v.mount_point, v.device, v.fs_type, v.sequence, v.observed_ns, v.geometry,
    v.verdict, v.data_offset_bytes, v.stripe_unit_bytes, ` + columnList("v", splitColumns[:]...)
