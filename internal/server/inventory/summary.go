package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Summary is GET /api/v1/summary.
type Summary struct {
	Volumes    int64            `json:"volumes"`
	Hosts      int64            `json:"hosts"`
	ByVerdict  map[string]int64 `json:"by_verdict"`
	ByProfile  map[string]int64 `json:"by_profile"`
	BySeverity map[string]int64 `json:"by_severity"`
	ByRule     []RuleCount      `json:"by_rule"`
	// Degraded counts volumes the evaluator judges degraded, out of
	// WithBaseline volumes it has judged.
	Degraded     int64 `json:"degraded"`
	WithBaseline int64 `json:"with_baseline"`
	// EstimatedPenalty is the split-I/O model's cost over the fleet, per
	// I/O size.
	EstimatedPenalty []Penalty     `json:"estimated_penalty"`
	TopOffenders     []TopOffender `json:"top_offenders"`
}

// RuleCount is how many volumes have a finding of a rule at a severity.
type RuleCount struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Volumes  int64  `json:"volumes"`
}

// Penalty is the fleet's predicted split I/O at one I/O size:
// VolumeEquivalents is the sum over volumes of the share of I/Os of that
// size that straddle a stripe-unit boundary — how many volumes' worth of
// I/Os pay for two stripe units (each split 8 KiB I/O costs about one more
// back-end I/O: 12.5% split measured ~11% IOPS lost). Mean is that sum over
// the volumes with a known split fraction.
type Penalty struct {
	IOSizeBytes       int     `json:"io_size_bytes"`
	AffectedVolumes   int64   `json:"affected_volumes"`
	KnownVolumes      int64   `json:"known_volumes"`
	VolumeEquivalents float64 `json:"volume_equivalents"`
	MeanSplitFraction float64 `json:"mean_split_fraction"`
}

// TopOffender is a volume with one of the highest predicted split fractions.
// In JSON (MarshalJSON) its SplitFraction is one member per I/O size,
// split_fraction_<key> (split_fraction_8k, split_fraction_64k), between
// stripe_unit_bytes and severity: the smallest size's always a number (a
// top offender's is above 0), the others null when unknown.
type TopOffender struct {
	ID              string
	Host            string
	MountPoint      string
	Verdict         string
	Profile         string
	DataOffsetBytes *int64
	StripeUnitBytes *int64
	// SplitFraction per vocab.IOSizes; nil: unknown.
	SplitFraction [vocab.NumIOSizes]*float64
	Severity      string
	Rule          string
	Remediation   string
}

// topOffenderHead and topOffenderTail are TopOffender's JSON members
// before and after the split fractions.
type topOffenderHead struct {
	ID              string `json:"id"`
	Host            string `json:"host"`
	MountPoint      string `json:"mount_point"`
	Verdict         string `json:"verdict"`
	Profile         string `json:"profile"`
	DataOffsetBytes *int64 `json:"data_offset_bytes"`
	StripeUnitBytes *int64 `json:"stripe_unit_bytes"`
}

type topOffenderTail struct {
	Severity    string `json:"severity"`
	Rule        string `json:"rule"`
	Remediation string `json:"remediation"`
}

// MarshalJSON writes the members in the order of the API's TopOffender.
func (t TopOffender) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(topOffenderHead{t.ID, t.Host, t.MountPoint, t.Verdict, t.Profile, t.DataOffsetBytes, t.StripeUnitBytes})
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(topOffenderTail{t.Severity, t.Rule, t.Remediation})
	if err != nil {
		return nil, err
	}
	b := head[:len(head)-1] // without its }
	for i, f := range t.SplitFraction {
		b = append(b, `,"split_fraction_`...)
		b = append(b, vocab.IOSizeKey(vocab.IOSize(i))...)
		b = append(b, `":`...)
		if f == nil {
			b = append(b, "null"...)
			continue
		}
		n, err := json.Marshal(*f)
		if err != nil {
			return nil, err
		}
		b = append(b, n...)
	}
	b = append(b, ',')
	return append(b, tail[1:]...), nil // tail without its {
}

const (
	defaultTop = 10
	maxTop     = 100
)

// summaryQuery reads the parameters of GET /api/v1/summary.
func summaryQuery(r *http.Request) (store.VolumeFilter, int, error) {
	p, err := newParams(r, summaryParams)
	if err != nil {
		return nil, 0, err
	}
	f, err := p.volumeFilter()
	if err != nil {
		return nil, 0, err
	}
	n, err := p.int64("top", 0, maxTop)
	if err != nil || n == nil {
		return f, defaultTop, err
	}
	return f, int(*n), nil
}

func (a *API) summary(w http.ResponseWriter, r *http.Request) {
	f, top, err := summaryQuery(r)
	if err == nil {
		err = a.ready(r.Context())
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, gen, asOf, err := a.summaries.get(r.Context(), a, a.sumIdx.Load(), summaryKey(r), f, top)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// How fresh the summary is: the inventory generation it is exactly,
	// and when the snapshot it was read from was taken.
	w.Header().Set("Plumbline-Summary-Generation", strconv.FormatUint(gen, 10))
	w.Header().Set("Plumbline-Summary-As-Of", asOf.UTC().Format(time.RFC3339Nano))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// summarize computes a summary from index ix and renders it.
func (a *API) summarize(ctx context.Context, ix *summaryIndex, f store.VolumeFilter, top int) ([]byte, error) {
	s, err := a.summaryOf(ctx, ix, f, top)
	if err != nil {
		return nil, err
	}
	out := Summary{Volumes: s.Volumes, Hosts: s.Hosts, ByVerdict: s.ByVerdict, ByProfile: s.ByProfile, BySeverity: s.BySeverity,
		ByRule: []RuleCount{}, Degraded: s.Degraded, WithBaseline: s.WithBaseline, TopOffenders: []TopOffender{}}
	for _, rc := range s.ByRule {
		out.ByRule = append(out.ByRule, RuleCount{Rule: rc.Rule, Severity: rc.Severity, Volumes: rc.Volumes})
	}
	for _, pn := range s.Penalties {
		pj := Penalty{IOSizeBytes: pn.IOSizeBytes, AffectedVolumes: pn.Affected, KnownVolumes: pn.Known, VolumeEquivalents: pn.VolumeEquivalents}
		if pn.Known > 0 {
			pj.MeanSplitFraction = pn.VolumeEquivalents / float64(pn.Known)
		}
		out.EstimatedPenalty = append(out.EstimatedPenalty, pj)
	}
	for _, v := range s.TopOffenders {
		out.TopOffenders = append(out.TopOffenders, topOffender(v))
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	return append(b, '\n'), nil
}

// summaryOf computes a summary from index ix when it answers f (see
// summaryIndex), else with the store's SQL aggregates. The top
// offenders' rows are read by id; one gone since ix's snapshot is left
// out.
func (a *API) summaryOf(ctx context.Context, ix *summaryIndex, f store.VolumeFilter, top int) (*store.InventorySummary, error) {
	if !ix.answers(f) {
		return a.st.SummarizeVolumes(ctx, f, top)
	}
	s, ids := ix.summarize(f, top)
	vols, err := a.st.InventoryVolumesByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.InventoryVolume, len(vols))
	for _, v := range vols {
		byID[v.ID] = v
	}
	s.TopOffenders = make([]*store.InventoryVolume, 0, len(ids))
	for _, id := range ids {
		if v := byID[id]; v != nil {
			s.TopOffenders = append(s.TopOffenders, v)
		}
	}
	return s, nil
}

func topOffender(v *store.InventoryVolume) TopOffender {
	t := TopOffender{ID: v.ID, Host: v.Hostname, MountPoint: v.MountPoint, Verdict: v.Verdict, Profile: v.Profile,
		Severity: v.Severity}
	if v.DataOffsetBytes >= 0 {
		t.DataOffsetBytes = &v.DataOffsetBytes
	}
	if v.StripeUnitBytes > 0 {
		t.StripeUnitBytes = &v.StripeUnitBytes
	}
	for i := range v.SplitFraction {
		// The smallest size's is known: the top offenders are the
		// volumes where it is above 0.
		if i == 0 || v.SplitFraction[i] >= 0 {
			t.SplitFraction[i] = &v.SplitFraction[i]
		}
	}
	if f := v.TopFinding; f != nil {
		t.Rule, t.Remediation = f.Rule, f.Remediation
	}
	return t
}
