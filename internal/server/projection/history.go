package projection

import (
	"context"
	"time"
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

// History returns the volume's geometry history: ingest records it with
// each geometry record, from the judged volumes (store.HistoryField).
func (p *Projection) History(ctx context.Context, agentID, mountPoint string) ([]Change, error) {
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
