package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// A volume's judged record is its inventory row (inventory_volumes, its
// findings and its page document): ingest's judge makes it from the
// geometry and the volume's stripe-scan runs, and the store writes it in
// the transaction that stores the volume (AppendBatch) or, re-judged
// under new rules or a new measurement, over the record of the same
// sequence (PutJudged). The store derives nothing: it sets where the
// volume lives (id, agent, host, sequence, observed time) and adds them
// to the document.

// putSnapshotJudged writes the judged records of a snapshot's volumes
// (sorted by mount point, already stored as rows of sequence r.server)
// and removes those of the agent's volumes the snapshot marked gone. A
// volume without a judged record (no verdict) gets none: the judge's loop
// judges it (store.GeometriesToJudge lists it).
func (s *Store) putSnapshotJudged(ctx context.Context, tx *sql.Tx, agentID string, r stored, vols []Volume) error {
	if err := s.removeGoneJudged(ctx, tx, agentID); err != nil {
		return err
	}
	var host string
	if err := s.txQueryRow(ctx, tx, s.q(`SELECT hostname FROM agents WHERE agent_id = ?`), agentID).Scan(&host); err != nil {
		return err
	}
	stored, err := s.judgedHashes(ctx, tx, agentID)
	if err != nil {
		return err
	}
	now := time.Now()
	rows := make([]InventoryVolume, 0, len(vols))
	var hashes []string
	var kept []InventoryVolume
	for _, v := range vols {
		if v.Judged.Verdict == "" {
			continue // not judged: the judge's loop judges it
		}
		if !slices.Contains(vocab.Verdicts(), v.Judged.Verdict) {
			return fmt.Errorf("volume %q: verdict %q: want one of %v", v.MountPoint, v.Judged.Verdict, vocab.Verdicts())
		}
		row, hash := judgedRow(v, agentID, host, r.server, r.ProducedAt, now)
		if h, ok := stored[v.MountPoint]; ok && h == hash {
			kept = append(kept, row)
			continue
		}
		rows, hashes = append(rows, row), append(hashes, hash)
	}
	if err := s.moveJudged(ctx, tx, kept); err != nil {
		return err
	}
	return s.putInventory(ctx, tx, rows, hashes)
}

// removeGoneJudged removes the judged records of the agent's volumes
// marked gone (one probe when there are none, the common case).
func (s *Store) removeGoneJudged(ctx context.Context, tx *sql.Tx, agentID string) error {
	var gone int
	if err := s.txQueryRow(ctx, tx, s.q(`SELECT COUNT(*) FROM (SELECT 1 FROM inventory_volumes f
JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point WHERE f.agent_id = ? AND NOT v.present LIMIT 1) AS gone`),
		agentID).Scan(&gone); err != nil || gone == 0 {
		return err
	}
	for _, table := range []string{"inventory_findings", "inventory_docs", "inventory_arrays"} {
		if _, err := s.txExec(ctx, tx, s.q(`DELETE FROM `+table+` WHERE volume_id IN (SELECT f.volume_id FROM inventory_volumes f
JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point WHERE f.agent_id = ? AND NOT v.present)`), agentID); err != nil {
			return err
		}
	}
	_, err := s.txExec(ctx, tx, s.q(`DELETE FROM inventory_volumes WHERE agent_id = ?
AND mount_point IN (SELECT mount_point FROM volumes WHERE agent_id = ? AND NOT present)`), agentID, agentID)
	return err
}

// judgedRow is v's judged record where it lives, and its judgedHash.
func judgedRow(v Volume, agentID, host string, seq uint64, observed, now time.Time) (InventoryVolume, string) {
	iv := v.Judged
	if iv.Device == "" && iv.FSType == "" {
		iv.Device, iv.FSType = v.Device, v.FSType
	}
	hash := judgedHash(iv)
	iv.ID = VolumeID(agentID, v.MountPoint)
	iv.AgentID, iv.MountPoint, iv.Hostname = agentID, v.MountPoint, host
	iv.Sequence, iv.ObservedAt, iv.JudgedAt = seq, observed, now
	iv.Doc = docWhere(iv.Doc, iv.ID, agentID, host, seq, observed)
	return iv, hash
}

// docWhere completes a judged document (a JSON object) with where the
// volume lives: agent_id, id, observed_at, sequence and, last, host (so
// that a rename rewrites the tail alone: docWithHost). An empty body
// stays empty: the API renders such a volume when read.
func docWhere(body []byte, id, agentID, host string, seq uint64, observed time.Time) []byte {
	if len(body) < 2 || body[len(body)-1] != '}' {
		return nil
	}
	b := bytes.NewBuffer(make([]byte, 0, len(body)+160))
	b.Write(body[:len(body)-1])
	sep := ","
	if len(body) == 2 {
		sep = ""
	}
	field := func(k string, v []byte) {
		b.WriteString(sep + `"` + k + `":`)
		b.Write(v)
		sep = ","
	}
	field("agent_id", jsonString(agentID))
	field("id", jsonString(id))
	if !observed.IsZero() {
		field("observed_at", jsonString(observed.UTC().Format(time.RFC3339Nano)))
	}
	field("sequence", strconv.AppendUint(nil, seq, 10))
	field("host", jsonString(host))
	b.WriteByte('}')
	return b.Bytes()
}

// docWithHost is a document of docWhere with another host.
func docWithHost(doc []byte, host string) []byte {
	i := bytes.LastIndex(doc, []byte(`,"host":`))
	if i < 0 {
		return doc
	}
	out := append(bytes.Clone(doc[:i]), `,"host":`...)
	out = append(out, jsonString(host)...)
	return append(out, '}')
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// StoredGeometry is a present volume's stored geometry and the sequence
// of the snapshot that set it: what the judge judges again.
type StoredGeometry struct {
	AgentID    string
	MountPoint string
	Sequence   uint64
	Device     string
	FSType     string
	// Geometry is the plumbline.v1.Volume as received and validated.
	Geometry []byte
}

// GeometriesToJudge returns up to limit present volumes, after the
// volume (agent, mount point; "", "": from the first), in that order,
// whose judged record is missing, of another snapshot or judged under
// rules other than version.
func (s *Store) GeometriesToJudge(ctx context.Context, version, afterAgent, afterMount string, limit int) ([]StoredGeometry, error) {
	return queryAll(ctx, s, "geometries to judge", `SELECT v.agent_id, v.mount_point, v.sequence, v.device, v.fs_type, v.geometry
FROM volumes v LEFT JOIN inventory_volumes f ON f.agent_id = v.agent_id AND f.mount_point = v.mount_point
WHERE v.present AND (f.volume_id IS NULL OR f.rules_version <> ? OR f.sequence <> v.sequence)
  AND (v.agent_id > ? OR (v.agent_id = ? AND v.mount_point > ?))
ORDER BY v.agent_id, v.mount_point LIMIT `+strconv.Itoa(limit), []any{version, afterAgent, afterAgent, afterMount}, scanStoredGeometry)
}

// StoredGeometryOf returns a present volume's stored geometry;
// ErrNotFound when the agent has no such present volume.
func (s *Store) StoredGeometryOf(ctx context.Context, agentID, mountPoint string) (StoredGeometry, error) {
	g, err := scanStoredGeometry(s.db.QueryRowContext(ctx, s.q(`SELECT agent_id, mount_point, sequence, device, fs_type, geometry
FROM volumes WHERE agent_id = ? AND mount_point = ? AND present`), agentID, mountPoint))
	if errors.Is(err, sql.ErrNoRows) {
		return g, fmt.Errorf("stored geometry of %s:%s: %w", agentID, mountPoint, ErrNotFound)
	}
	if err != nil {
		return g, fmt.Errorf("stored geometry of %s:%s: %w", agentID, mountPoint, err)
	}
	return g, nil
}

func scanStoredGeometry(row rowScanner) (StoredGeometry, error) {
	var g StoredGeometry
	var seq int64
	err := row.Scan(&g.AgentID, &g.MountPoint, &seq, &g.Device, &g.FSType, &g.Geometry)
	g.Sequence = uint64(seq)
	return g, err
}

// PutJudged writes judged records over those of the same volumes (each
// Volume with AgentID, MountPoint, Sequence and Judged set), in one
// transaction, and returns how many it wrote: a volume whose row moved on
// meanwhile (a newer snapshot, judged on arrival) or went is left alone,
// and so is a record judged under a higher rules epoch (a newer replica's).
func (s *Store) PutJudged(ctx context.Context, vols []Volume) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		rows := make([]InventoryVolume, 0, len(vols))
		var hashes []string
		for _, v := range vols {
			var seq, observed, epoch int64
			var host string
			err := tx.QueryRowContext(ctx, s.q(`SELECT v.sequence, v.observed_ns, a.hostname, COALESCE(f.rules_epoch, 0) FROM volumes v
JOIN agents a ON a.agent_id = v.agent_id
LEFT JOIN inventory_volumes f ON f.agent_id = v.agent_id AND f.mount_point = v.mount_point AND f.sequence = v.sequence
WHERE v.agent_id = ? AND v.mount_point = ? AND v.present`),
				v.AgentID, v.MountPoint).Scan(&seq, &observed, &host, &epoch)
			if errors.Is(err, sql.ErrNoRows) || err == nil && (uint64(seq) != v.Sequence || epoch > v.Judged.RulesEpoch) {
				continue
			}
			if err != nil {
				return err
			}
			row, hash := judgedRow(v, v.AgentID, host, v.Sequence, fromUnixNano(observed), now)
			rows, hashes = append(rows, row), append(hashes, hash)
		}
		n = len(rows)
		return s.putInventory(ctx, tx, rows, hashes)
	})
	if err != nil {
		return 0, fmt.Errorf("put judged: %w", err)
	}
	return n, nil
}
