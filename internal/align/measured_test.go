package align

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The straddle cost of the measurements below: 200 µs per split read,
// 150 to 260 µs.
const (
	cost, costLow, costHigh = 200e-6, 150e-6, 260e-6
)

// measuredOn is a confident stripe-scan summary of a unit on dev.
func measuredOn(dev, basis string, unit uint64, conf float64) *plumblinev1.StripeMeasurement {
	return &plumblinev1.StripeMeasurement{UnitBytes: unit, Confidence: conf, AgreeingRuns: 6,
		StraddleCostSeconds: cost, StraddleCostLowSeconds: costLow, StraddleCostHighSeconds: costHigh,
		Device: dev, Basis: basis, OffsetKnown: true, MeasuredAt: timestamppb.New(time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC))}
}

// noneOn is a summary of runs on dev that saw no stripe.
func noneOn(dev string, runs uint32) *plumblinev1.StripeMeasurement {
	return &plumblinev1.StripeMeasurement{NoneRuns: runs, Device: dev, Basis: BasisDisk, OffsetKnown: true}
}

// withMeasurement is v with its measured_stripe set.
func withMeasurement(v *plumblinev1.Volume, m *plumblinev1.StripeMeasurement) *plumblinev1.Volume {
	v.MeasuredStripe = m
	return v
}

// hiddenRAID is a volume on hardware RAID that neither a declaration nor
// the kernel reveals: the disk says nothing but its 512-byte sectors.
func hiddenRAID(fsType string, cluster uint32, offset uint64) *plumblinev1.Volume {
	return volume(fsType, cluster, fsLayer(fsType, cluster, 0, 0), partition("sdb1", offset, 512), disk("sdb", 512, 512))
}

func TestEvaluateMeasuredStripe(t *testing.T) {
	t.Parallel()
	md := &plumblinev1.Layer{Kind: "raid", Device: "md0", RaidLevel: "raid0", StripeUnitBytes: 512 * kib, RaidDisks: 2, RaidDataDisks: 2,
		OffsetBytes: u64(mib), Below: []string{"sda1", "sdc1"}, Source: "sysfs", PhysicalSectorBytes: 4096}
	mdVolume := func(m *plumblinev1.StripeMeasurement) *plumblinev1.Volume {
		return withMeasurement(volume("xfs", 4096, fsLayer("xfs", 4096, 512*kib, mib), md,
			partition("sda1", mib, 512), disk("sda", 512, 4096), partition("sdc1", mib, 512), disk("sdc", 512, 4096)), m)
	}
	tests := []struct {
		name       string
		vol        *plumblinev1.Volume
		verdict    string
		unit       uint64
		unitSrc    string
		striped    string
		findings   []string
		confidence float64
		// split8K and split64 are the predicted shares (offset-caused plus
		// granularity) the measured cost is weighed by; priced says the
		// measured cost and penalty are set at all.
		priced           bool
		split8K, split64 float64
		// say: the finding of rule sayRule says each of these.
		sayRule string
		say     []string
	}{
		{
			// The 2003-era partition on a hidden 64 KiB array: judged
			// misaligned against the measured unit, with the usual fix.
			name:    "hidden hardware RAID 64K at 31.5K",
			vol:     withMeasurement(hiddenRAID("ntfs", 64*kib, legacyOffset), measuredOn("sdb", BasisDisk, 64*kib, 0.9973)),
			verdict: Misaligned, unit: 64 * kib, unitSrc: SourceMeasured, striped: "sdb",
			findings:   []string{"critical:partition-offset-stripe-unit", "info:stripe-unit-measured"},
			confidence: 0.9973,
			priced:     true, split8K: 0.125, split64: 1,
			sayRule: RulePartitionOffsetStripeUnit,
			say:     []string{"64 KiB stripe unit of sdb (inferred by the geometry probe, confidence 99.73%)", "align=1024"},
		},
		{
			name:    "the measured finding says where the unit comes from and how to confirm it",
			vol:     withMeasurement(hiddenRAID("ntfs", 64*kib, legacyOffset), measuredOn("sdb", BasisDisk, 64*kib, 0.9973)),
			verdict: Misaligned, unit: 64 * kib, unitSrc: SourceMeasured, striped: "sdb",
			findings:   []string{"critical:partition-offset-stripe-unit", "info:stripe-unit-measured"},
			confidence: 0.9973,
			priced:     true, split8K: 0.125, split64: 1,
			sayRule: RuleStripeUnitMeasured,
			say: []string{"geometry probe inferred a 64 KiB stripe unit on sdb", "confidence 99.73%, 6 runs agree", "latest 2026-11-26 14:05 UTC",
				"a read split across two stripe units took 200 µs longer (150 µs to 260 µs)",
				"declared_devices: [{device: sdb, raid: {level: LEVEL, stripe_unit: 64KiB, disks: N}}]"},
		},
		{
			// Aligned, but 64 KiB reads on 4 KiB blocks still split 15 in
			// 16 times: the penalty counts the granularity's share too.
			name:    "hidden hardware RAID 64K at 1M",
			vol:     withMeasurement(hiddenRAID("ext4", 4*kib, mib), measuredOn("sdb", BasisDisk, 64*kib, 0.95)),
			verdict: Aligned, unit: 64 * kib, unitSrc: SourceMeasured, striped: "sdb",
			findings:   []string{"info:stripe-unit-measured"},
			confidence: 0.95,
			priced:     true, split8K: 1.0 / 16, split64: 15.0 / 16,
			sayRule: RuleStripeUnitMeasured,
			say:     []string{"confidence 95%", "declared_devices: [{device: /dev/sdb, raid: {level: LEVEL, stripe_unit: 64KiB, disks: N}}]"},
		},
		{
			// A confident measurement of another unit: the declared unit
			// still decides the verdict, and the finding names both.
			name:    "declared 64K, measured 128K",
			vol:     withMeasurement(sqlVolume("raid10", 64*kib, 4, 2, mib, 64*kib), measuredOn("sdb", BasisStripedDevice, 128*kib, 0.999)),
			verdict: Aligned, unit: 64 * kib, unitSrc: "declared", striped: "sdb",
			findings:   []string{"warning:stripe-unit-disagrees"},
			confidence: 0.999,
			sayRule:    RuleStripeUnitDisagrees,
			say: []string{"measured a 128 KiB stripe unit on sdb (confidence 99.9%, 6 runs agree", "sdb has a 64 KiB stripe unit from the agent config's declaration",
				"the verdict and split fractions use 64 KiB",
				"declared_devices: [{device: sdb, raid: {level: raid10, stripe_unit: 128KiB, disks: 4}}]; if 64 KiB is right", "a controller cache"},
		},
		{
			name:    "md chunk 512K, measured 64K",
			vol:     mdVolume(measuredOn("md0", BasisStripedDevice, 64*kib, MeasuredConfidence)),
			verdict: Aligned, unit: 512 * kib, unitSrc: "sysfs", striped: "md0",
			findings:   []string{"warning:stripe-unit-disagrees"},
			confidence: MeasuredConfidence,
			sayRule:    RuleStripeUnitDisagrees,
			say:        []string{"md0 has a 512 KiB stripe unit from sysfs", "mdadm --detail /dev/md0"},
		},
		{
			name:    "a differing measurement below the threshold is not reported",
			vol:     withMeasurement(sqlVolume("raid10", 64*kib, 4, 2, mib, 64*kib), measuredOn("sdb", BasisStripedDevice, 128*kib, 0.98)),
			verdict: Aligned, unit: 64 * kib, unitSrc: "declared", striped: "sdb",
		},
		{
			// The measurement confirms the declaration: its cost prices the
			// predicted split.
			name:    "declared 64K at 31.5K, measured 64K",
			vol:     withMeasurement(sqlVolume("raid10", 64*kib, 4, 2, legacyOffset, 64*kib), measuredOn("sdb", BasisStripedDevice, 64*kib, 0.995)),
			verdict: Misaligned, unit: 64 * kib, unitSrc: "declared", striped: "sdb",
			findings:   []string{"critical:partition-offset-stripe-unit"},
			confidence: 0.995,
			priced:     true, split8K: 0.125, split64: 1,
		},
		{
			name:    "md chunk confirmed at a low confidence",
			vol:     mdVolume(measuredOn("md0", BasisStripedDevice, 512*kib, 0.7)),
			verdict: Aligned, unit: 512 * kib, unitSrc: "sysfs", striped: "md0",
			confidence: 0.7,
			priced:     true, split8K: 0, split64: 0,
		},
		{
			// The operator declared the array unstriped: the measurement
			// does not overrule the declaration, but a confident one says
			// that one of them is wrong.
			name:     "declared raid1 without a unit, measured 64K",
			vol:      withMeasurement(sqlVolume("raid1", 0, 2, 1, legacyOffset, 4*kib), measuredOn("sdb", BasisDisk, 64*kib, 0.995)),
			verdict:  Aligned,
			findings: []string{"warning:stripe-unit-disagrees", "info:stripe-unit-unknown", "info:allocation-unit-below-recommendation"},
			// The measurement contradicts the declaration.
			confidence: 0.995,
			sayRule:    RuleStripeUnitDisagrees,
			say: []string{"sdb is declared in the agent config as raid1 with no stripe unit: the verdict uses none",
				"declared_devices: [{device: sdb, raid: {level: raid1, stripe_unit: 64KiB, disks: 2}}]", "if the declaration is right"},
		},
		{
			name:     "declared raid1 without a unit, unsure measurement",
			vol:      withMeasurement(sqlVolume("raid1", 0, 2, 1, legacyOffset, 4*kib), measuredOn("sdb", BasisDisk, 64*kib, 0.9)),
			verdict:  Aligned,
			findings: []string{"info:stripe-unit-unknown", "info:allocation-unit-below-recommendation"},
		},
		{
			name:     "a measurement of a device not in the stack is ignored",
			vol:      withMeasurement(hiddenRAID("ext4", 4*kib, legacyOffset), measuredOn("sdc", BasisDisk, 64*kib, 0.999)),
			verdict:  Aligned,
			findings: []string{"info:stripe-unit-unknown"},
		},
		{
			// sdc is md0's second member; the verdict follows sda.
			name:    "a measurement of a disk off the primary path is ignored",
			vol:     mdVolume(measuredOn("sdc", BasisDisk, 64*kib, 0.999)),
			verdict: Aligned, unit: 512 * kib, unitSrc: "sysfs", striped: "md0",
		},
		{
			name:     "a disk measurement of a partition is ignored",
			vol:      withMeasurement(hiddenRAID("ext4", 4*kib, legacyOffset), measuredOn("sdb1", BasisDisk, 64*kib, 0.999)),
			verdict:  Aligned,
			findings: []string{"info:stripe-unit-unknown"},
		},
		{
			name:     "the probe saw none",
			vol:      withMeasurement(hiddenRAID("ext4", 4*kib, mib), noneOn("sdb", 12)),
			verdict:  Aligned,
			findings: []string{"info:stripe-unit-unknown"},
			sayRule:  RuleStripeUnitUnknown,
			say: []string{"so only the physical-sector rule was checked; the geometry probe saw no split penalty on sdb in 12 runs",
				"does not prove there is no striping: a controller's cache or SSD members can hide it",
				"declared_devices: [{device: /dev/sdb, raid: {level: raid10, stripe_unit: 64KiB, disks: 4}}]"},
		},
		{
			name:     "the probe saw none once",
			vol:      withMeasurement(hiddenRAID("ext4", 4*kib, mib), noneOn("sdb", 1)),
			verdict:  Aligned,
			findings: []string{"info:stripe-unit-unknown"},
			sayRule:  RuleStripeUnitUnknown,
			say:      []string{"in 1 run,"},
		},
		{
			// "None" says nothing against a known unit.
			name:    "declared 64K, the probe saw none",
			vol:     withMeasurement(sqlVolume("raid10", 64*kib, 4, 2, mib, 64*kib), noneOn("sdb", 12)),
			verdict: Aligned, unit: 64 * kib, unitSrc: "declared", striped: "sdb",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := proto.Clone(tt.vol)
			a := Evaluate(tt.vol)
			if !proto.Equal(before, tt.vol) {
				t.Errorf("Evaluate modified its input")
			}
			if a.GetVerdict() != tt.verdict {
				t.Errorf("Evaluate().verdict = %q, want %q; findings: %v", a.GetVerdict(), tt.verdict, a.GetFindings())
			}
			if diff := cmp.Diff(tt.findings, rules(a)); diff != "" {
				t.Errorf("Evaluate() findings (-want +got):\n%s", diff)
			}
			if a.GetStripeUnitBytes() != tt.unit || a.GetStripeUnitSource() != tt.unitSrc || a.GetStripedDevice() != tt.striped {
				t.Errorf("Evaluate() stripe unit = %d from %q on %q, want %d from %q on %q",
					a.GetStripeUnitBytes(), a.GetStripeUnitSource(), a.GetStripedDevice(), tt.unit, tt.unitSrc, tt.striped)
			}
			if a.GetStripeUnitConfidence() != tt.confidence {
				t.Errorf("Evaluate().stripe_unit_confidence = %v, want %v", a.GetStripeUnitConfidence(), tt.confidence)
			}
			checkPrice(t, a, tt.priced, map[uint32]float64{8 * kib: tt.split8K, 64 * kib: tt.split64})
			checkVerdictBacked(t, a)
			for _, f := range a.GetFindings() {
				if f.GetMessage() == "" || f.GetRemediation() == "" {
					t.Errorf("finding %s has an empty message or remediation: %v", f.GetRule(), f)
				}
			}
			if tt.sayRule != "" {
				checkSays(t, a, tt.sayRule, tt.say)
			}
		})
	}
}

// checkPrice: when priced, the measured cost is the measurement's and the
// penalty of each I/O size is its predicted split (offset-caused plus
// granularity, which must add up to split) times the cost; otherwise
// neither is set.
func checkPrice(t *testing.T, a *plumblinev1.Alignment, priced bool, split map[uint32]float64) {
	t.Helper()
	if !priced {
		if a.MeasuredSplitCostSeconds != nil || a.GetMeasuredSplitCostLowSeconds() != 0 || a.GetMeasuredSplitCostHighSeconds() != 0 || len(a.GetMeasuredPenaltySeconds()) != 0 {
			t.Errorf("Evaluate() measured cost = %v [%v, %v], penalty %v; want none",
				a.MeasuredSplitCostSeconds, a.GetMeasuredSplitCostLowSeconds(), a.GetMeasuredSplitCostHighSeconds(), a.GetMeasuredPenaltySeconds())
		}
		return
	}
	if a.MeasuredSplitCostSeconds == nil || a.GetMeasuredSplitCostSeconds() != cost || a.GetMeasuredSplitCostLowSeconds() != costLow || a.GetMeasuredSplitCostHighSeconds() != costHigh {
		t.Errorf("Evaluate() measured cost = %v [%v, %v], want %v [%v, %v]",
			a.MeasuredSplitCostSeconds, a.GetMeasuredSplitCostLowSeconds(), a.GetMeasuredSplitCostHighSeconds(), cost, costLow, costHigh)
	}
	if len(a.GetMeasuredPenaltySeconds()) != len(IOSizes()) {
		t.Errorf("Evaluate().measured_penalty_seconds = %v, want one per I/O size %v", a.GetMeasuredPenaltySeconds(), IOSizes())
	}
	for size, want := range split {
		if got := a.GetSplitFraction()[size] + a.GetGranularitySplitFraction()[size]; math.Abs(got-want) > 1e-12 {
			t.Errorf("Evaluate() predicted split of %d-byte I/Os = %v, want %v", size, got, want)
		}
		if got := a.GetMeasuredPenaltySeconds()[size]; math.Abs(got-want*cost) > 1e-15 {
			t.Errorf("Evaluate().measured_penalty_seconds[%d] = %v, want %v × %v", size, got, want, cost)
		}
	}
}

func checkSays(t *testing.T, a *plumblinev1.Alignment, rule string, want []string) {
	t.Helper()
	for _, f := range a.GetFindings() {
		if f.GetRule() != rule {
			continue
		}
		text := f.GetMessage() + " | " + f.GetRemediation()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("finding %s = %q, want it to contain %q", rule, text, w)
			}
		}
		return
	}
	t.Errorf("Evaluate() findings = %v, want rule %s", rules(a), rule)
}

// TestEvaluateHostileMeasurement: measurements come from agents. Numbers
// no stripe-scan run can produce are not a measurement: the verdict is the
// one without it, and nothing in it is NaN or infinite.
func TestEvaluateHostileMeasurement(t *testing.T) {
	t.Parallel()
	broken := func(f func(m *plumblinev1.StripeMeasurement)) *plumblinev1.StripeMeasurement {
		m := measuredOn("sdb", BasisDisk, 64*kib, 0.999)
		f(m)
		return m
	}
	tests := []struct {
		name string
		m    *plumblinev1.StripeMeasurement
	}{
		{"NaN confidence", broken(func(m *plumblinev1.StripeMeasurement) { m.Confidence = math.NaN() })},
		{"infinite confidence", broken(func(m *plumblinev1.StripeMeasurement) { m.Confidence = math.Inf(1) })},
		{"negative confidence", broken(func(m *plumblinev1.StripeMeasurement) { m.Confidence = -0.5 })},
		{"confidence above 1", broken(func(m *plumblinev1.StripeMeasurement) { m.Confidence = 1.5 })},
		{"unit not a power of two", broken(func(m *plumblinev1.StripeMeasurement) { m.UnitBytes = 96 * kib })},
		{"unit below 4 KiB", broken(func(m *plumblinev1.StripeMeasurement) { m.UnitBytes = 2 * kib })},
		{"unit of 1 byte", broken(func(m *plumblinev1.StripeMeasurement) { m.UnitBytes = 1 })},
		{"unit of 2^63 bytes", broken(func(m *plumblinev1.StripeMeasurement) { m.UnitBytes = 1 << 63 })},
		{"offset not known", broken(func(m *plumblinev1.StripeMeasurement) { m.OffsetKnown = false })},
		{"no basis", broken(func(m *plumblinev1.StripeMeasurement) { m.Basis = "" })},
		{"no device", broken(func(m *plumblinev1.StripeMeasurement) { m.Device = "" })},
		{"none with no runs", &plumblinev1.StripeMeasurement{Device: "sdb", Basis: BasisDisk, OffsetKnown: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []*plumblinev1.Volume{hiddenRAID("ntfs", 64*kib, legacyOffset), sqlVolume("raid10", 64*kib, 4, 2, legacyOffset, 64*kib)} {
				want := Evaluate(v)
				got := Evaluate(withMeasurement(v, tt.m))
				if diff := cmp.Diff(want, got, cmpProto); diff != "" {
					t.Errorf("Evaluate(%s) differs from Evaluate without a measurement (-want +got):\n%s", tt.name, diff)
				}
				checkFinite(t, got)
			}
		})
	}
}

// TestEvaluateHostileCost: a believable unit with an unbelievable cost is
// judged against, but its cost prices nothing.
func TestEvaluateHostileCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		cost, lo, hi  float64
		agreeingCount uint32
	}{
		{"NaN cost", math.NaN(), costLow, costHigh, 3},
		{"infinite cost", math.Inf(1), costLow, math.Inf(1), 3},
		{"negative cost", -cost, -costHigh, -costLow, 3},
		{"NaN interval", cost, math.NaN(), math.NaN(), 3},
		{"cost outside its interval", cost, costHigh, costHigh * 2, 3},
		{"zero cost", 0, 0, 0, 3},
		{"an hour per split read", 3600, 3600, 3600, 3},
		{"largest float", math.MaxFloat64, math.MaxFloat64, math.MaxFloat64, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := measuredOn("sdb", BasisDisk, 64*kib, 0.999)
			m.StraddleCostSeconds, m.StraddleCostLowSeconds, m.StraddleCostHighSeconds, m.AgreeingRuns = tt.cost, tt.lo, tt.hi, tt.agreeingCount
			a := Evaluate(withMeasurement(hiddenRAID("ntfs", 64*kib, legacyOffset), m))
			if a.GetStripeUnitSource() != SourceMeasured || a.GetVerdict() != Misaligned {
				t.Errorf("Evaluate() = %s against %d from %q, want misaligned against the measured unit", a.GetVerdict(), a.GetStripeUnitBytes(), a.GetStripeUnitSource())
			}
			checkPrice(t, a, false, nil)
			checkFinite(t, a)
			checkSays(t, a, RuleStripeUnitMeasured, []string{"confidence 99.9%"})
			for _, f := range a.GetFindings() {
				if strings.Contains(f.GetMessage(), "µs") {
					t.Errorf("finding %s = %q, want no cost quoted", f.GetRule(), f.GetMessage())
				}
			}
		})
	}
}

var cmpProto = cmp.Comparer(proto.Equal)

// checkFinite: no number in the verdict is NaN or infinite.
func checkFinite(t *testing.T, a *plumblinev1.Alignment) {
	t.Helper()
	nums := []float64{a.GetMeasuredSplitCostSeconds(), a.GetMeasuredSplitCostLowSeconds(), a.GetMeasuredSplitCostHighSeconds(), a.GetStripeUnitConfidence()}
	for _, m := range []map[uint32]float64{a.GetSplitFraction(), a.GetGranularitySplitFraction(), a.GetSectorRmwFraction(), a.GetMeasuredPenaltySeconds()} {
		for _, x := range m {
			nums = append(nums, x)
		}
	}
	for _, x := range nums {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Errorf("Evaluate() = %v: want no NaN or infinite number", a)
			return
		}
	}
}

func TestRulesSorted(t *testing.T) {
	t.Parallel()
	r := Rules()
	if !slices.IsSorted(r) || len(slices.Compact(slices.Clone(r))) != len(r) {
		t.Errorf("Rules() = %v, want sorted and unique", r)
	}
	for _, id := range []string{RuleStripeUnitMeasured, RuleStripeUnitDisagrees, RuleStripeUnitUnknown} {
		if !slices.Contains(r, id) {
			t.Errorf("Rules() = %v, want it to hold %s", r, id)
		}
	}
}

// FuzzEvaluateMeasured: whatever numbers an agent's runs carry, Evaluate
// neither panics nor returns a NaN or infinite number, judges only against
// a believable unit, and prices only the unit it judges against.
func FuzzEvaluateMeasured(f *testing.F) {
	f.Add(uint64(64*kib), 0.999, uint32(3), uint32(0), cost, costLow, costHigh, "sdb", BasisDisk, true, uint64(legacyOffset))
	f.Add(uint64(0), 0.0, uint32(0), uint32(9), 0.0, 0.0, 0.0, "sdb", BasisDisk, true, uint64(mib))
	f.Add(uint64(96*kib), math.NaN(), uint32(1), uint32(1), math.Inf(1), -1.0, math.NaN(), "sdb1", BasisStripedDevice, false, uint64(0))
	f.Fuzz(func(t *testing.T, unit uint64, conf float64, agree, none uint32, c, lo, hi float64, dev, basis string, offKnown bool, off uint64) {
		m := &plumblinev1.StripeMeasurement{UnitBytes: unit, Confidence: conf, AgreeingRuns: agree, NoneRuns: none,
			StraddleCostSeconds: c, StraddleCostLowSeconds: lo, StraddleCostHighSeconds: hi, Device: dev, Basis: basis, OffsetKnown: offKnown}
		for _, v := range []*plumblinev1.Volume{hiddenRAID("ext4", 4*kib, off), sqlVolume("raid10", 64*kib, 4, 2, off, 64*kib)} {
			a := Evaluate(withMeasurement(v, m))
			checkFinite(t, a)
			if a.GetStripeUnitSource() == SourceMeasured {
				u := a.GetStripeUnitBytes()
				if u != unit || u < minMeasuredUnit || u&(u-1) != 0 || conf < 0 || conf > 1 {
					t.Fatalf("Evaluate(%v) judged against a measured %d, confidence %v", m, u, conf)
				}
			}
			if a.MeasuredSplitCostSeconds != nil && (a.GetStripeUnitBytes() != unit || a.GetMeasuredSplitCostSeconds() != c) {
				t.Fatalf("Evaluate(%v) priced a %d-byte unit with a measurement of %d", m, a.GetStripeUnitBytes(), unit)
			}
		}
	})
}
