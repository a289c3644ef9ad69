package ingest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/render"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The judge is the one place on the server that applies the alignment
// rules: judgeVolume turns one validated geometry volume and its
// stripe-scan measurement into the volume's judged record — verdict,
// findings, split figures per I/O size, profile, media, RAID level,
// measured stripe and cost, the page document — and the tracked fields of
// its geometry history. Ingest stores it with the volume (AppendBatch);
// the judge loop (judgeloop.go) judges stored volumes again when the
// rules change or a stripe-scan run arrives. Nothing else on the server
// reads a verdict from the geometry: the stored geometry has none.

// Rules are what the judge judges under: the rules of package align
// (align.RulesVersion) with a site's overrides. The zero value is the
// shipped rules.
type Rules struct {
	Overrides align.Overrides
}

// Version names the rules: every judged record keeps the version it was
// judged under, and the judge loop judges again the records of another.
// It changes with align.RulesVersion and with the overrides.
func (r Rules) Version() string {
	v := "align-" + strconv.Itoa(align.RulesVersion)
	if len(r.Overrides.Severity) == 0 {
		return v
	}
	h := sha256.New()
	for _, rule := range slices.Sorted(maps.Keys(r.Overrides.Severity)) {
		fmt.Fprintf(h, "%s=%s;", rule, r.Overrides.Severity[rule])
	}
	return v + "+" + hex.EncodeToString(h.Sum(nil)[:6])
}

// check refuses overrides the API could not show: an unknown rule or
// severity.
func (r Rules) check() error {
	for rule, sev := range r.Overrides.Severity {
		if !slices.Contains(align.Rules(), rule) {
			return fmt.Errorf("rule %q: want one of %s", rule, strings.Join(align.Rules(), ", "))
		}
		if vocab.SeverityRank(sev) == 0 {
			return fmt.Errorf("rule %q: severity %q: want critical, warning or info", rule, sev)
		}
	}
	return nil
}

// JudgeVolume is the judge's judgement of one validated volume v under
// rules r with measured stripe m (as the server's stripe-scan runs of the
// volume give it): the volume as AppendBatch stores it. For tools and
// tests that store volumes without a report.
func JudgeVolume(v *plumblinev1.Volume, m *plumblinev1.StripeMeasurement, r Rules) (store.Volume, error) {
	return judgeVolume(v, m, r)
}

// judgeVolume judges v (validated) under rules r with its measured stripe
// m (the server's stripe-scan runs of it, measuredStripe; it replaces
// whatever the agent put in Volume.measured_stripe).
func judgeVolume(v *plumblinev1.Volume, m *plumblinev1.StripeMeasurement, r Rules) (store.Volume, error) {
	stored := proto.Clone(v).(*plumblinev1.Volume)
	stored.Alignment, stored.MeasuredStripe = nil, nil
	geom, err := proto.MarshalOptions{Deterministic: true}.Marshal(stored)
	if err != nil {
		return store.Volume{}, err
	}
	judged := stored // stored as marshalled; judged from here on
	judged.MeasuredStripe = m
	a := align.EvaluateWith(judged, r.Overrides)
	judged.Alignment = a
	if a.DataOffsetBytes != nil && a.GetDataOffsetBytes() > math.MaxInt64 {
		return store.Volume{}, fmt.Errorf("data offset %d: layer offsets add up to more than 2^63-1", a.GetDataOffsetBytes())
	}
	if a.GetStripeUnitBytes() > math.MaxInt64 {
		return store.Volume{}, fmt.Errorf("stripe unit %d: want at most 2^63-1", a.GetStripeUnitBytes())
	}
	iv := judgedColumns(judged, a)
	iv.RulesVersion, iv.RulesEpoch = r.Version(), align.RulesVersion
	// Without a document (it cannot render) the API renders the volume
	// when read, and reports the error then.
	iv.Doc, _ = volumeDoc(judged, &iv)
	return store.Volume{
		MountPoint: v.GetMountPoint(), Device: v.GetDevice(), FSType: v.GetFilesystem().GetType(),
		Geometry: geom, Judged: iv, History: historyFields(judged, a),
	}, nil
}

// judgedColumns are the judged record's columns of v judged as a.
func judgedColumns(v *plumblinev1.Volume, a *plumblinev1.Alignment) store.InventoryVolume {
	iv := store.InventoryVolume{
		Device: v.GetDevice(), FSType: v.GetFilesystem().GetType(), Verdict: a.GetVerdict(),
		DataOffsetBytes: -1, StripeUnitBytes: int64(a.GetStripeUnitBytes()), AllocationUnitBytes: -1, Severity: "none",
		MeasuredSplitCost: -1, MeasuredSplitCostLow: -1, MeasuredSplitCostHigh: -1,
	}
	if a.DataOffsetBytes != nil {
		iv.DataOffsetBytes = int64(a.GetDataOffsetBytes())
	}
	for i := range iv.SplitFraction {
		size := vocab.IOSize(i)
		iv.SplitFraction[i], iv.GranularitySplit[i], iv.MeasuredPenalty[i] = -1, -1, -1
		if f, ok := a.GetSplitFraction()[size]; ok {
			iv.SplitFraction[i] = f
		}
		if g, ok := a.GetGranularitySplitFraction()[size]; ok {
			iv.GranularitySplit[i] = g
		}
	}
	measuredColumns(&iv, a)
	iv.Arrays = arraysOf(v)
	p := baseline.ProfileOf(v, a)
	iv.Profile, iv.Media, iv.RAIDLevel = p.Key(), string(p.Media), cmp.Or(p.RAIDLevel, vocab.NoRAID)
	if p.AllocationUnit > 0 {
		iv.AllocationUnitBytes = int64(p.AllocationUnit)
	}
	findings := slices.Clone(a.GetFindings())
	slices.SortStableFunc(findings, func(x, y *plumblinev1.Finding) int {
		return cmp.Compare(vocab.SeverityRank(y.GetSeverity()), vocab.SeverityRank(x.GetSeverity()))
	})
	for _, f := range findings {
		iv.Findings = append(iv.Findings, store.Finding{Rule: f.GetRule(), Severity: f.GetSeverity(), Message: f.GetMessage(), Remediation: f.GetRemediation()})
		if !slices.Contains(iv.Rules, f.GetRule()) {
			iv.Rules = append(iv.Rules, f.GetRule())
		}
	}
	slices.Sort(iv.Rules)
	if len(findings) > 0 && findings[0].GetSeverity() != "" {
		iv.Severity = findings[0].GetSeverity()
		iv.SeverityRank = vocab.SeverityRank(iv.Severity)
	}
	return iv
}

// measuredColumns copies what the geometry probe adds to the verdict: the
// stripe unit's source and confidence, and the measured split cost with
// its penalty per I/O size (left at -1 when not measured).
func measuredColumns(iv *store.InventoryVolume, a *plumblinev1.Alignment) {
	iv.StripeUnitSource, iv.StripeUnitConfidence = a.GetStripeUnitSource(), a.GetStripeUnitConfidence()
	if a.MeasuredSplitCostSeconds == nil {
		return
	}
	iv.MeasuredSplitCost = a.GetMeasuredSplitCostSeconds()
	iv.MeasuredSplitCostLow, iv.MeasuredSplitCostHigh = a.GetMeasuredSplitCostLowSeconds(), a.GetMeasuredSplitCostHighSeconds()
	for i := range iv.MeasuredPenalty {
		if p, ok := a.GetMeasuredPenaltySeconds()[vocab.IOSize(i)]; ok {
			iv.MeasuredPenalty[i] = p
		}
	}
}

// volumeDoc renders the judged volume's page document: the volume as
// `agent inspect --format json` prints it (with the judged alignment), as
// compact JSON, and the derived columns media, profile, raid_level and
// severity after it. Where the volume lives (agent_id, id, observed_at,
// sequence, host) the store adds when it writes it.
func volumeDoc(v *plumblinev1.Volume, iv *store.InventoryVolume) ([]byte, error) {
	b, err := render.JSON(v)
	if err != nil {
		return nil, err
	}
	var doc bytes.Buffer
	doc.Grow(len(b) + 128)
	if err := json.Compact(&doc, b); err != nil {
		return nil, err
	}
	if doc.Len() < 2 || doc.Bytes()[doc.Len()-1] != '}' {
		return nil, fmt.Errorf("volume %q: not a JSON object", v.GetMountPoint())
	}
	doc.Truncate(doc.Len() - 1)
	if doc.Len() > 1 {
		doc.WriteByte(',')
	}
	derived, err := json.Marshal(struct {
		Media     string `json:"media"`
		Profile   string `json:"profile"`
		RAIDLevel string `json:"raid_level"`
		Severity  string `json:"severity"`
	}{iv.Media, iv.Profile, iv.RAIDLevel, iv.Severity})
	if err != nil {
		return nil, err
	}
	doc.Write(derived[1:]) // its fields and the closing brace
	return doc.Bytes(), nil
}
