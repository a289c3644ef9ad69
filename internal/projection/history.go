package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Change is one entry of a volume's geometry history: a field that differs
// between two consecutive geometry snapshots of its host.
type Change struct {
	At       time.Time `json:"at"`
	Sequence uint64    `json:"sequence"`
	// Kind classifies the change: reformat (file-system type or uuid),
	// cluster-change (allocation unit), new-partition (partition offset,
	// table or number), offset-change (data offset on the striped device),
	// raid-change (level or stripe unit), device-change, verdict-change,
	// appeared, removed.
	Kind  string `json:"kind"`
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// trackedFields are the fields the history compares, and the kind of
// change each one makes.
var trackedFields = map[string]string{
	"filesystem.type":             "reformat",
	"filesystem.uuid":             "reformat",
	"filesystem.block_size_bytes": "cluster-change",
	"partition.offset_bytes":      "new-partition",
	"partition.table":             "new-partition",
	"partition.number":            "new-partition",
	"alignment.data_offset_bytes": "offset-change",
	"alignment.stripe_unit_bytes": "raid-change",
	"raid.level":                  "raid-change",
	"device":                      "device-change",
	"alignment.verdict":           "verdict-change",
}

// volumeState is the tracked fields of one volume in one snapshot.
func volumeState(v *plumblinev1.Volume) map[string]string {
	a := align.Evaluate(v) // the server's rules, as for the volumes table
	st := map[string]string{
		"filesystem.type":             v.GetFilesystem().GetType(),
		"filesystem.uuid":             v.GetFilesystem().GetUuid(),
		"filesystem.block_size_bytes": num(uint64(v.GetFilesystem().GetBlockSizeBytes())),
		"alignment.stripe_unit_bytes": num(a.GetStripeUnitBytes()),
		"alignment.verdict":           a.GetVerdict(),
		"device":                      v.GetDevice(),
	}
	if a.DataOffsetBytes != nil {
		st["alignment.data_offset_bytes"] = strconv.FormatUint(a.GetDataOffsetBytes(), 10)
	}
	for _, l := range v.GetLayers() {
		switch l.GetKind() {
		case string(vocab.LayerPartition):
			if _, ok := st["partition.offset_bytes"]; ok {
				continue // the topmost partition
			}
			if l.OffsetBytes != nil {
				st["partition.offset_bytes"] = strconv.FormatUint(l.GetOffsetBytes(), 10)
			}
			st["partition.table"] = l.GetPartitionTable()
			st["partition.number"] = num(uint64(l.GetPartitionNumber()))
		case string(vocab.LayerRAID):
			if _, ok := st["raid.level"]; !ok && l.GetRaidLevel() != "" {
				st["raid.level"] = l.GetRaidLevel()
			}
		}
	}
	return st
}

// num is n in decimal, "" for 0 (unknown).
func num(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// historyPage is how many geometry records one step of the history reads.
const historyPage = 200

// History brings the agent's geometry history up to date (reading the
// geometry records stored since the last time) and returns the volume's.
func (p *Projection) History(ctx context.Context, agentID, mountPoint string) ([]Change, error) {
	if err := p.updateHistory(ctx, agentID); err != nil {
		return nil, err
	}
	changes, err := p.st.VolumeChanges(ctx, agentID, mountPoint)
	if err != nil {
		return nil, err
	}
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		out = append(out, Change{At: c.ObservedAt, Sequence: c.Sequence, Kind: c.Kind, Field: c.Field, From: c.Old, To: c.New})
	}
	return out, nil
}

func (p *Projection) updateHistory(ctx context.Context, agentID string) error {
	mark, err := p.st.HistoryMark(ctx, agentID)
	if err != nil {
		return err
	}
	states, err := p.st.HistoryStates(ctx, agentID)
	if err != nil {
		return err
	}
	h := historyStep{prev: map[string]map[string]string{}, first: mark == 0}
	for mp, s := range states {
		if s.State == "" {
			continue // gone
		}
		var m map[string]string
		if json.Unmarshal([]byte(s.State), &m) == nil {
			h.prev[mp] = m
		}
	}
	for {
		recs, err := p.st.GeometryRecordsAfter(ctx, agentID, mark, historyPage)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		h.changed, h.changes = map[string]store.HistoryState{}, nil
		for _, rec := range recs {
			mark = rec.Sequence
			h.apply(rec)
		}
		if err := p.st.PutHistory(ctx, agentID, mark, h.changed, h.changes); err != nil {
			return fmt.Errorf("history of %q: %w", agentID, err)
		}
	}
}

// historyStep folds an agent's geometry records, in order, into the
// tracked state of each volume and the changes between them.
type historyStep struct {
	// prev is each present volume's tracked state; first: no record has
	// been folded yet (the first snapshot's volumes do not "appear").
	prev  map[string]map[string]string
	first bool
	// changed and changes are what the records folded since the last
	// PutHistory made.
	changed map[string]store.HistoryState
	changes []store.VolumeChange
}

// apply folds one geometry record.
func (h *historyStep) apply(rec store.GeometryRecord) {
	var r plumblinev1.Record
	if err := proto.Unmarshal(rec.Payload, &r); err != nil || r.GetGeometry().GetInventory() == nil {
		return // validated on ingest; a damaged record changes nothing
	}
	seen := map[string]bool{}
	for _, v := range r.GetGeometry().GetInventory().GetVolumes() {
		mp := v.GetMountPoint()
		seen[mp] = true
		cur := volumeState(v)
		old, had := h.prev[mp]
		switch {
		case !had && !h.first:
			h.changes = append(h.changes, store.VolumeChange{MountPoint: mp, Sequence: rec.Sequence, ObservedAt: rec.ProducedAt,
				Field: "volume", Kind: "appeared", New: mp})
		case had:
			h.changes = append(h.changes, diffStates(mp, rec, old, cur)...)
		}
		if !had || !maps.Equal(old, cur) {
			b, _ := json.Marshal(cur)
			h.changed[mp] = store.HistoryState{Sequence: rec.Sequence, State: string(b)}
			h.prev[mp] = cur
		}
	}
	for mp := range h.prev {
		if !seen[mp] {
			h.changes = append(h.changes, store.VolumeChange{MountPoint: mp, Sequence: rec.Sequence, ObservedAt: rec.ProducedAt,
				Field: "volume", Kind: "removed", Old: mp})
			h.changed[mp] = store.HistoryState{Sequence: rec.Sequence, State: ""}
			delete(h.prev, mp)
		}
	}
	h.first = false
}

func diffStates(mp string, rec store.GeometryRecord, old, cur map[string]string) []store.VolumeChange {
	var out []store.VolumeChange
	fields := make([]string, 0, len(trackedFields))
	for f := range trackedFields {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		if old[f] != cur[f] {
			out = append(out, store.VolumeChange{MountPoint: mp, Sequence: rec.Sequence, ObservedAt: rec.ProducedAt,
				Field: f, Kind: trackedFields[f], Old: old[f], New: cur[f]})
		}
	}
	return out
}
