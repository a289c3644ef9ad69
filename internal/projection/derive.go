package projection

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/baseline"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Derive is the store.DeriveFunc of the inventory: the query columns of a
// stored volume, from its geometry and the server's verdict in it. A
// geometry that does not decode (it was validated on ingest, so only a
// damaged database has one) still gets a row from the volumes table's own
// columns.
func Derive(v store.Volume) (store.InventoryVolume, error) {
	iv := store.InventoryVolume{
		Device: v.Device, FSType: v.FSType, Verdict: v.Verdict,
		DataOffsetBytes: -1, StripeUnitBytes: int64(v.StripeUnitBytes), AllocationUnitBytes: -1, Severity: "none",
		MeasuredSplitCost: -1, MeasuredSplitCostLow: -1, MeasuredSplitCostHigh: -1,
		RAIDLevel: vocab.NoRAID, Media: string(baseline.UnknownMedia),
	}
	for i := range iv.SplitFraction {
		iv.SplitFraction[i], iv.GranularitySplit[i], iv.MeasuredPenalty[i] = -1, -1, -1
		if f := v.SplitFraction[i]; f != nil {
			iv.SplitFraction[i] = *f
		}
	}
	if v.DataOffsetBytes != nil {
		iv.DataOffsetBytes = int64(*v.DataOffsetBytes)
	}
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(v.Geometry, &pv); err != nil {
		iv.Profile = "unknown"
		return iv, nil
	}
	a := pv.GetAlignment()
	if a == nil {
		a = align.Evaluate(&pv)
		pv.Alignment = a
	}
	for i := range iv.GranularitySplit {
		if g, ok := a.GetGranularitySplitFraction()[vocab.IOSize(i)]; ok {
			iv.GranularitySplit[i] = g
		}
	}
	measuredColumns(&iv, a)
	iv.Arrays = arraysOf(&pv)
	p := baseline.ProfileOf(&pv)
	iv.Profile = p.Key()
	iv.Media = string(p.Media)
	iv.RAIDLevel = p.RAIDLevel
	if iv.RAIDLevel == "" {
		iv.RAIDLevel = vocab.NoRAID
	}
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
	if len(findings) > 0 {
		iv.Severity = findings[0].GetSeverity()
		iv.SeverityRank = vocab.SeverityRank(iv.Severity)
	}
	if iv.Severity == "" {
		iv.Severity = "none"
	}
	// The page document; without one (it cannot render) a page renders
	// the volume when read, and reports the error then.
	if doc, err := volumeDoc(v, &iv); err == nil {
		iv.Doc = doc
	}
	return iv, nil
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
