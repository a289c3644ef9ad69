package ingest

import (
	"slices"
	"strconv"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// trackedFields are the fields the geometry history compares, and the
// kind of change each one makes: reformat (file-system type or uuid),
// cluster-change (allocation unit), new-partition (partition offset,
// table or number), offset-change (data offset on the striped device),
// raid-change (level or stripe unit), device-change, verdict-change.
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

// trackedOrder is trackedFields' names, sorted: the order of a
// volume's history fields and of the changes of one snapshot.
var trackedOrder = slices.Sorted(func(yield func(string) bool) {
	for f := range trackedFields {
		if !yield(f) {
			return
		}
	}
})

// historyFields are the tracked fields of judged volume v (judged as a),
// every one of them, in trackedOrder ("" where unset).
func historyFields(v *plumblinev1.Volume, a *plumblinev1.Alignment) []store.HistoryField {
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
	out := make([]store.HistoryField, len(trackedOrder))
	for i, f := range trackedOrder {
		out[i] = store.HistoryField{Field: f, Kind: trackedFields[f], Value: st[f]}
	}
	return out
}

// num is n in decimal, "" for 0 (unknown).
func num(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}
