package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

// volumeQuery reads the parameters of GET /api/v1/volumes.
func volumeQuery(r *http.Request) (q store.VolumeQuery, format string, hash uint64, err error) {
	p, err := newParams(r, volumeListParams)
	if err != nil {
		return q, "", 0, err
	}
	if q.VolumeFilter, err = p.volumeFilter(); err != nil {
		return q, "", 0, err
	}
	if q.Sort, q.Desc, err = p.sortParam(store.VolumeSortFields(), "host"); err != nil {
		return q, "", 0, err
	}
	if format, err = p.format(r); err != nil {
		return q, "", 0, err
	}
	if q.Limit, err = p.limit(); err != nil {
		return q, "", 0, err
	}
	if format == "csv" && !p.has("limit") {
		q.Limit = 0 // the whole result, streamed
	}
	hash = queryHash("volumes", p)
	if q.After, err = p.token(hash, store.KeysetKinds(q.Sort)); err != nil {
		return q, "", 0, err
	}
	return q, format, hash, nil
}

// page runs a query for one page (Limit rows, or everything when 0) and
// returns the rows and the token of the next page ("" after the last).
func (a *API) page(r *http.Request, q store.VolumeQuery, hash uint64) ([]*store.InventoryVolume, string, error) {
	limit := q.Limit
	if limit > 0 {
		q.Limit = limit + 1
	}
	var rows []*store.InventoryVolume
	err := a.st.QueryVolumes(r.Context(), q, func(v *store.InventoryVolume) error {
		rows = append(rows, v)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
		next = encodeToken(hash, store.VolumeKeyset(rows[limit-1], q.Sort))
	}
	return rows, next, nil
}

func (a *API) volumes(w http.ResponseWriter, r *http.Request) {
	q, format, hash, err := volumeQuery(r)
	if err == nil {
		err = a.ready(r.Context())
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if format == "csv" {
		a.volumesCSV(w, r, q, hash)
		return
	}
	q.WithDoc = true
	rows, next, err := a.page(r, q, hash)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	buf := a.buffer()
	defer a.bufs.Put(buf)
	buf.WriteString("{\n  \"volumes\": [")
	for i, v := range rows {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n    ")
		if err := a.writeVolume(r.Context(), buf, v); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	if len(rows) > 0 {
		buf.WriteString("\n  ")
	}
	buf.WriteByte(']')
	if next != "" {
		buf.WriteString(",\n  \"next_page_token\": ")
		tok, _ := json.Marshal(next)
		buf.Write(tok)
	}
	buf.WriteString("\n}\n")
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// buffer returns an empty page buffer from the pool: pages are built in
// reused memory, so a page costs no large allocation.
func (a *API) buffer() *bytes.Buffer {
	if b, ok := a.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return bytes.NewBuffer(make([]byte, 0, 256<<10))
}

// writeVolume appends a volume of a page: its stored document with the
// live states added. A row without a document (derived before there were
// documents, until the next full sync) is rendered from its geometry.
func (a *API) writeVolume(ctx context.Context, buf *bytes.Buffer, v *store.InventoryVolume) error {
	doc := v.Doc
	if len(doc) < 2 || doc[len(doc)-1] != '}' {
		full, err := a.st.InventoryVolumeByID(ctx, v.ID)
		if err != nil {
			return err
		}
		full.Baseline, full.SlowMembers, full.Database = v.Baseline, v.SlowMembers, v.Database
		obj, err := volumeItem(full)
		if err != nil {
			return err
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.ID, err)
		}
		buf.Write(b)
		return nil
	}
	live, err := json.Marshal(liveJSON(v))
	if err != nil {
		return fmt.Errorf("volume %s: live states: %w", v.ID, err)
	}
	buf.Write(doc[:len(doc)-1])
	buf.WriteByte(',')
	buf.Write(live[1:])
	return nil
}

// liveJSON is what a volume row adds to its judged document: the states
// the server's loops keep beside the judged record — the evaluator's
// baseline, the sibling judge's slow members, the database judge's state.
func liveJSON(v *store.InventoryVolume) map[string]any {
	return map[string]any{
		"baseline":     baselineJSON(v.Baseline),
		"slow_members": slowMembersJSON(v.SlowMembers),
		"database":     databaseJSON(v.Database),
	}
}

// volumeItem is a volume of the API: the inspect shape plus where it
// lives, its id and the derived columns — its judged document when it has
// one (the stored geometry carries no alignment).
func volumeItem(v *store.InventoryVolume) (map[string]any, error) {
	var obj map[string]any
	if doc := v.Doc; len(doc) >= 2 && doc[len(doc)-1] == '}' {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // keep 64-bit integers exact
		if err := dec.Decode(&obj); err != nil {
			return nil, fmt.Errorf("volume %s: document: %w", v.ID, err)
		}
	} else {
		var err error
		obj, err = projection.VolumeJSON(store.Volume{AgentID: v.AgentID, Hostname: v.Hostname, MountPoint: v.MountPoint,
			Geometry: v.Geometry, Sequence: v.Sequence, ObservedAt: v.ObservedAt})
		if err != nil {
			return nil, err
		}
		projection.AddDerived(obj, v)
	}
	for k, val := range liveJSON(v) {
		obj[k] = val
	}
	return obj, nil
}

// Baseline is the evaluator's state of a volume.
type Baseline struct {
	State     string    `json:"state"`
	Degraded  bool      `json:"degraded"`
	Reason    string    `json:"reason"`
	UpdatedAt time.Time `json:"updated_at"`
}

func baselineJSON(b *store.BaselineState) *Baseline {
	if b == nil {
		return nil
	}
	return &Baseline{State: b.State, Degraded: b.Degraded, Reason: b.Reason, UpdatedAt: b.UpdatedAt}
}

// detail checks a request for one volume or host (no parameters) and
// waits until the API can answer (ready).
func (a *API) detail(r *http.Request) error {
	if _, err := newParams(r, nil); err != nil {
		return err
	}
	return a.ready(r.Context())
}

func (a *API) volume(w http.ResponseWriter, r *http.Request) {
	if err := a.detail(r); err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v, err := a.st.InventoryVolumeByID(ctx, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	obj, err := volumeItem(v)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	probes, err := a.st.LatestProbes(ctx, v.AgentID, v.MountPoint)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ps := make([]ProbeSummary, 0, len(probes))
	for _, p := range probes {
		ps = append(ps, probeSummary(p))
	}
	obj["probes"] = ps
	dbOps, err := a.databaseOps(ctx, v)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	obj["database_io"] = dbOps
	dbHist, err := a.databaseHistory(ctx, v)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	obj["database_history"] = dbHist
	hist, err := a.proj.History(ctx, v.AgentID, v.MountPoint)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	obj["history"] = hist
	writeJSON(w, http.StatusOK, obj)
}

// ProbeSummary is the latest run of one probe kind on a volume.
type ProbeSummary struct {
	Kind            string    `json:"kind"`
	Device          string    `json:"device"`
	BlockSizeBytes  uint32    `json:"block_size_bytes"`
	QueueDepth      uint32    `json:"queue_depth"`
	StartedAt       time.Time `json:"started_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	Ops             uint64    `json:"ops"`
	Errors          uint64    `json:"errors"`
	Bytes           uint64    `json:"bytes"`
	IOPS            float64   `json:"iops"`
	BytesPerSecond  float64   `json:"bytes_per_second"`
	Skipped         bool      `json:"skipped"`
	StoppedReason   string    `json:"stopped_reason"`
	// Failure is the agent's message for a run that never ran (stopped
	// reason refused, failed, lock-timeout).
	Failure string `json:"failure,omitempty"`
	// Latency quantiles in seconds, from the histogram (histogram.Quantile:
	// interpolated log-linearly inside the bucket, within the exact minimum
	// and maximum; the numbers the baseline judges); absent without samples.
	Latency *Latency `json:"latency_seconds,omitempty"`
	// ArrayActivity are the md arrays under the volume that ran a sync
	// action at the run's start or end; absent when none did.
	ArrayActivity []store.ArrayActivity `json:"array_activity,omitempty"`
}

// Latency summarises a latency histogram, in seconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func probeSummary(p store.ProbeResult) ProbeSummary {
	s := ProbeSummary{Kind: p.Kind, Device: p.Device, BlockSizeBytes: p.BlockSizeBytes, QueueDepth: p.QueueDepth,
		StartedAt: p.StartedAt, DurationSeconds: p.Duration.Seconds(), Ops: p.Ops, Errors: p.Errors, Bytes: p.Bytes,
		Skipped: p.Skipped, StoppedReason: p.StoppedReason, Failure: p.Failure, ArrayActivity: p.ArrayActivity}
	if d := p.Duration.Seconds(); d > 0 {
		s.IOPS = float64(p.Ops) / d
		s.BytesPerSecond = float64(p.Bytes) / d
	}
	h, err := wire.DecodeHistogram(p.Histogram)
	if err != nil || h.Count() == 0 {
		return s
	}
	s.Latency = &Latency{Count: h.Count(), Mean: h.Mean().Seconds(), Max: h.Max().Seconds(),
		P50: h.Quantile(0.50), P95: h.Quantile(0.95), P99: h.Quantile(0.99)}
	return s
}

// SlowMember is a member below the volume that the sibling judge names
// slower than its siblings doing the same work.
type SlowMember struct {
	Array                string    `json:"array"`
	Kind                 string    `json:"kind"`
	Member               string    `json:"member"`
	ByID                 []string  `json:"by_id"`
	Serial               string    `json:"serial"`
	Direction            string    `json:"direction"`
	Ratio                float64   `json:"ratio"`
	AwaitSeconds         float64   `json:"await_seconds"`
	SiblingsAwaitSeconds float64   `json:"siblings_await_seconds"`
	Utilisation          float64   `json:"utilisation"`
	SiblingsUtilisation  float64   `json:"siblings_utilisation"`
	Since                time.Time `json:"since"`
	UpdatedAt            time.Time `json:"updated_at"`
}

// slowMembersJSON is the volume's slow members, [] for none.
func slowMembersJSON(ms []store.SlowMember) []SlowMember {
	out := make([]SlowMember, 0, len(ms))
	for _, m := range ms {
		byID := m.ByID
		if byID == nil {
			byID = []string{}
		}
		out = append(out, SlowMember{Array: m.Array, Kind: m.Kind, Member: m.Member, ByID: byID, Serial: m.Serial,
			Direction: m.Direction, Ratio: m.Ratio, AwaitSeconds: m.AwaitSeconds, SiblingsAwaitSeconds: m.SiblingsAwaitSeconds,
			Utilisation: m.Utilisation, SiblingsUtilisation: m.SiblingsUtilisation, Since: m.Since, UpdatedAt: m.UpdatedAt})
	}
	return out
}
