package align

import (
	"fmt"
	"math"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// SourceMeasured is vocab.SourceMeasured as the wire's string: the
// stripe_unit_source of a stripe unit inferred by the geometry probe
// (stripe-scan runs, Volume.measured_stripe) because no layer declares,
// reports or hints one.
const SourceMeasured = string(vocab.SourceMeasured)

// Where stripe-scan runs place their reads (StripeMeasurement.basis, the
// probe's Placement.Basis): on the striped device when one is visible,
// else on the disk; when an offset on the way is unknown, relative to the
// file system's own device (such runs do not count as a measurement).
const (
	BasisStripedDevice    = "striped device"
	BasisDisk             = "disk"
	BasisFileSystemDevice = "file system device"
)

// PlacementBases are the placement bases a stripe-scan run may report.
func PlacementBases() []string {
	return []string{BasisStripedDevice, BasisDisk, BasisFileSystemDevice}
}

// legacyFileSystemBasis is what agents before BasisFileSystemDevice
// reported for a placement with an unknown offset.
const legacyFileSystemBasis = "file system device (an offset below it is unknown: the answer is relative to it)"

// FileSystemDeviceBasis reports whether basis is BasisFileSystemDevice,
// as current or earlier agents spell it.
func FileSystemDeviceBasis(basis string) bool {
	return basis == BasisFileSystemDevice || basis == legacyFileSystemBasis
}

// MeasuredConfidence is the confidence from which a measured stripe unit
// that differs from the one the verdict is judged against is reported
// (stripe-unit-disagrees). A less confident measurement leaves the known
// unit unquestioned.
const MeasuredConfidence = 0.99

// The measured units believed: the powers of two a stripe unit can be.
// Anything else came from a broken or hostile agent and is ignored.
const (
	minMeasuredUnit = 4 << 10
	maxMeasuredUnit = 1 << 30
)

// measurement is a volume's StripeMeasurement once checked against its
// stack.
type measurement struct {
	m *plumblinev1.StripeMeasurement
	// index is the position of the measured device in the primary path.
	index int
	// costOK: the straddle cost and its interval are usable numbers.
	costOK bool
}

// measured checks m and places it on the volume's primary path. ok is
// false when there is no measurement, when its numbers cannot be trusted
// (a confidence outside [0, 1], a unit that is no power of two from 4 KiB
// to 1 GiB, no run behind it), when the runs could not place their reads
// relative to the device (offset unknown), or when its device is not the
// disk (basis disk) or a layer below the file system (basis striped
// device) on the primary path: a measurement of another device says
// nothing of this stack.
func (s *stack) measured(m *plumblinev1.StripeMeasurement) (measurement, bool) {
	if m == nil || !m.GetOffsetKnown() || m.GetDevice() == "" {
		return measurement{}, false
	}
	if c := m.GetConfidence(); math.IsNaN(c) || c < 0 || c > 1 {
		return measurement{}, false
	}
	switch u := m.GetUnitBytes(); {
	case u == 0 && m.GetNoneRuns() == 0:
		return measurement{}, false
	case u != 0 && (u < minMeasuredUnit || u > maxMeasuredUnit || u&(u-1) != 0):
		return measurement{}, false
	}
	for pi := 1; pi < len(s.primary); pi++ {
		l := s.layers[s.primary[pi]]
		if l.GetDevice() != m.GetDevice() {
			continue
		}
		switch m.GetBasis() {
		case BasisDisk:
			if !presentsDisk(l) {
				return measurement{}, false
			}
		case BasisStripedDevice:
			if kindOf(l) == vocab.LayerFilesystem {
				return measurement{}, false
			}
		default:
			return measurement{}, false
		}
		return measurement{m: m, index: pi, costOK: costOK(m)}, true
	}
	return measurement{}, false
}

// maxStraddleCost bounds a believable straddle cost: a split 8 KiB read
// that costs more than this came from a broken clock or a hostile agent.
const maxStraddleCost = 10 // seconds

// costOK: the straddle cost is a positive number inside its interval,
// which lies in [0, maxStraddleCost] (NaN compares false and fails). A unit
// inferred with no cost (0) is no cost measurement: a split read that
// costs nothing would not have been seen.
func costOK(m *plumblinev1.StripeMeasurement) bool {
	c, lo, hi := m.GetStraddleCostSeconds(), m.GetStraddleCostLowSeconds(), m.GetStraddleCostHighSeconds()
	return c > 0 && lo >= 0 && lo <= c && c <= hi && hi <= maxStraddleCost
}

// stripe is the measured unit as the stripe the verdict is judged against.
func (s *stack) measuredStripe(ms measurement) stripe {
	l := s.layers[s.primary[ms.index]]
	return stripe{unit: ms.m.GetUnitBytes(), source: vocab.SourceMeasured, device: l.GetDevice(), index: ms.index,
		layerKind: kindOf(l), confidence: ms.m.GetConfidence()}
}

// useMeasurement sets what the measurement adds to the verdict: its
// confidence when it is the judged unit, confirms it or confidently
// contradicts it, and the measured split cost and penalty when the judged
// unit is the measured one (the cost of a straddle of another unit is no
// cost of this one).
func (e *evaluation) useMeasurement() {
	ms, a := e.meas, e.a
	if e.disagrees() {
		a.StripeUnitConfidence = ms.m.GetConfidence()
		return
	}
	if ms.m == nil || !e.known() || ms.m.GetUnitBytes() == 0 || ms.index != e.stripe.index {
		return
	}
	if ms.m.GetUnitBytes() != e.stripe.unit {
		return // disagrees, or too unsure to
	}
	a.StripeUnitConfidence = ms.m.GetConfidence()
	if !ms.costOK {
		return
	}
	cost := ms.m.GetStraddleCostSeconds()
	a.MeasuredSplitCostSeconds = &cost
	a.MeasuredSplitCostLowSeconds = ms.m.GetStraddleCostLowSeconds()
	a.MeasuredSplitCostHighSeconds = ms.m.GetStraddleCostHighSeconds()
	if a.DataOffsetBytes == nil {
		return // no split fraction to weigh the cost by
	}
	a.MeasuredPenaltySeconds = map[uint32]float64{}
	for _, size := range IOSizes() {
		a.MeasuredPenaltySeconds[size] = (a.SplitFraction[size] + a.GranularitySplitFraction[size]) * cost
	}
}

// disagrees says whether a confident measurement of the striped device
// contradicts the unit known from another source, or a declaration that
// gives none.
func (e *evaluation) disagrees() bool {
	ms := e.meas
	if ms.m == nil || ms.m.GetUnitBytes() == 0 || ms.m.GetConfidence() < MeasuredConfidence {
		return false
	}
	if !e.known() {
		return e.st.declared(ms)
	}
	return e.stripe.source != vocab.SourceMeasured && ms.index == e.stripe.index && ms.m.GetUnitBytes() != e.stripe.unit
}

// declared says whether the measured layer is the operator's declaration:
// an array declared with no stripe unit (RAID 1) is declared unstriped,
// and a measurement does not overrule the operator's word.
func (s *stack) declared(ms measurement) bool {
	l := s.layers[s.primary[ms.index]]
	return sourceOf(l, "stripe_unit_bytes") == vocab.SourceDeclared
}

// measuredFinding says the judged unit is the probe's inference, how sure
// it is, and how to confirm it.
func (e *evaluation) measuredFinding() {
	st, m := e.stripe, e.meas.m
	l := e.st.layers[e.st.primary[st.index]]
	msg := fmt.Sprintf("no RAID layer or stripe hint is known for this volume; the geometry probe inferred a %s stripe unit on %s from reads straddling candidate boundaries (%s), and the verdict is judged against it",
		human(st.unit), st.device, runsWord(m))
	if e.meas.costOK {
		msg += fmt.Sprintf("; a read split across two stripe units took %s longer (%s to %s)",
			seconds(m.GetStraddleCostSeconds()), seconds(m.GetStraddleCostLowSeconds()), seconds(m.GetStraddleCostHighSeconds()))
	}
	var fix string
	if presentsDisk(l) {
		fix = fmt.Sprintf("an inferred unit is not a configuration: confirm it in the RAID controller's configuration and declare the array in the agent config, which replaces the inference: %s",
			declaredExample(e.v, l, fmt.Sprintf("%dKiB", st.unit>>10)))
	} else {
		fix = fmt.Sprintf("an inferred unit is not a configuration: the agent read no stripe geometry for %s layer %s; confirm the unit with %s and check that the agent can read sysfs and the LVM metadata backups (/etc/lvm/backup)",
			l.GetKind(), nameOr(l), configTool(l))
	}
	e.f.add(RuleStripeUnitMeasured, Info, msg, fix)
}

// disagreeFinding names both units, where each comes from, and how to
// settle which is right. The verdict stays judged against the known unit
// (none, for an array declared unstriped).
func (e *evaluation) disagreeFinding() {
	st, m := e.stripe, e.meas.m
	l := e.st.layers[e.st.primary[e.meas.index]]
	mu := fmt.Sprintf("%dKiB", m.GetUnitBytes()>>10)
	known := fmt.Sprintf("%s has a %s stripe unit from %s: the verdict and split fractions use %s", st.device, human(st.unit), sourceWord(st), human(st.unit))
	right := human(st.unit)
	if !e.known() {
		known = fmt.Sprintf("%s is declared in the agent config as %s with no stripe unit: the verdict uses none", l.GetDevice(), orWord(l.GetRaidLevel(), "an array"))
		right = "the declaration"
	}
	var fix string
	switch {
	case st.source == vocab.SourceDeclared || !e.known():
		fix = fmt.Sprintf("if the array's unit is %s, correct its entry in the agent config: %s", human(m.GetUnitBytes()), declaredExample(e.v, l, mu))
	case st.fromFS:
		fix = fmt.Sprintf("if the array's unit is %s, the file system's stripe hints are wrong: declare the array in the agent config (%s) and set the hints to match", human(m.GetUnitBytes()), declaredExample(e.v, l, mu))
	case presentsDisk(l):
		fix = fmt.Sprintf("if the array's unit is %s, declare it in the agent config, which replaces what the device reports: %s", human(m.GetUnitBytes()), declaredExample(e.v, l, mu))
	default:
		fix = fmt.Sprintf("%s's unit is what the kernel stripes by; a different measured unit suggests a hardware array below it with its own unit, or a misled probe", st.device)
	}
	e.f.add(RuleStripeUnitDisagrees, Warning,
		fmt.Sprintf("the geometry probe measured a %s stripe unit on %s (%s), but %s",
			human(m.GetUnitBytes()), m.GetDevice(), runsWord(m), known),
		fmt.Sprintf("check the array's own configuration (%s): %s; if %s is right, the probe was misled (a controller cache, SSD members or other I/O on the device shape read latency) and later runs should stop agreeing with it",
			configTool(l), fix, right))
}

// noneWord is what stripe-unit-unknown adds when the probe looked for a
// stripe on this volume's stack and saw none.
func (e *evaluation) noneWord() string {
	m := e.meas.m
	if m == nil || m.GetUnitBytes() != 0 {
		return ""
	}
	runs := "runs"
	if m.GetNoneRuns() == 1 {
		runs = "run"
	}
	return fmt.Sprintf("; the geometry probe saw no split penalty on %s in %d %s, which does not prove there is no striping: a controller's cache or SSD members can hide it",
		m.GetDevice(), m.GetNoneRuns(), runs)
}

// declaredExample is the agent-config entry that declares layer l as
// hardware RAID with the given stripe_unit value.
func declaredExample(v *plumblinev1.Volume, l *plumblinev1.Layer, unit string) string {
	dev := "/dev/" + deviceOr(l, "sdX")
	if windowsFS(v.GetFilesystem().GetType()) {
		dev = deviceOr(l, "PhysicalDriveN")
	}
	level, disks := l.GetRaidLevel(), fmt.Sprint(l.GetRaidDisks())
	if level != "" && l.GetRaidDisks() != 0 {
		return fmt.Sprintf("declared_devices: [{device: %s, raid: {level: %s, stripe_unit: %s, disks: %s}}]", dev, level, unit, disks)
	}
	return fmt.Sprintf("declared_devices: [{device: %s, raid: {level: LEVEL, stripe_unit: %s, disks: N}}] with the controller's RAID level and disk count", dev, unit)
}

// configTool is where an array's own stripe unit can be read.
func configTool(l *plumblinev1.Layer) string {
	switch {
	case kindOf(l) == vocab.LayerRAID && vocab.Source(l.GetSource()) == vocab.SourceSysfs:
		return "mdadm --detail /dev/" + l.GetDevice()
	case kindOf(l) == vocab.LayerLVM:
		return "lvs -o +stripes,stripesize"
	case vocab.Source(l.GetSource()) == vocab.SourceWMI:
		return "Get-VirtualDisk | Format-List Interleave"
	}
	return "the RAID controller's management utility or BIOS"
}

// sourceWord says where a known stripe unit comes from.
func sourceWord(st stripe) string {
	switch {
	case st.fromFS:
		return "the file system's stripe hints (" + string(st.source) + ")"
	case st.source == vocab.SourceKernelHint:
		return "the kernel's minimum_io_size hint"
	case st.source == vocab.SourceDeclared:
		return "the agent config's declaration"
	}
	return string(st.source)
}

// runsWord is the measurement's confidence, runs and date.
func runsWord(m *plumblinev1.StripeMeasurement) string {
	runs := "runs agree"
	if m.GetAgreeingRuns() == 1 {
		runs = "run agrees"
	}
	s := fmt.Sprintf("confidence %s, %d %s", confidence(m.GetConfidence()), m.GetAgreeingRuns(), runs)
	if t := m.GetMeasuredAt(); t != nil && t.IsValid() {
		s += ", latest " + t.AsTime().UTC().Format("2006-01-02 15:04 UTC")
	}
	return s
}

// confidence writes c as a percentage rounded down, so that 0.99996 does
// not read as certainty.
func confidence(c float64) string { return trimFloat(math.Floor(c*1e4)/100) + "%" }

// seconds writes a latency in the unit it reads best in.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return trimFloat(s) + " s"
	case s >= 1e-3:
		return trimFloat(s*1e3) + " ms"
	}
	return trimFloat(s*1e6) + " µs"
}
