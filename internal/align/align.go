// Package align holds Plumbline's alignment rules: pure functions from a
// volume's layer chain to a verdict, findings with concrete remediations and
// the predicted split-I/O fractions. The agent evaluates them locally and the
// server re-evaluates every geometry it receives, so a rule fix reaches the
// fleet without agent upgrades.
package align

import (
	"fmt"
	"slices"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Verdicts (vocab defines them).
const (
	Aligned    = vocab.Aligned
	Misaligned = vocab.Misaligned
	Unknown    = vocab.Unknown
)

// Severities (vocab defines them and their ranking).
const (
	Critical = vocab.Critical
	Warning  = vocab.Warning
	Info     = vocab.Info
)

// Rule ids. They are stable: alerts, dashboards and scripts match on them.
const (
	RulePartitionOffsetStripeUnit      = "partition-offset-stripe-unit"
	RuleLVMDataOffsetStripeUnit        = "lvm-data-offset-stripe-unit"
	RuleDataOffsetStripeUnit           = "data-offset-stripe-unit"
	RuleOffsetPhysicalSector           = "offset-physical-sector"
	RuleStripeUnitAllocationUnit       = "stripe-unit-allocation-unit"
	RuleFSStripeHintsMismatch          = "fs-stripe-hints-mismatch"
	RuleFSStripeHintsMissing           = "fs-stripe-hints-missing"
	RuleStripeUnitUnknown              = "stripe-unit-unknown"
	RuleOffsetUnknown                  = "offset-unknown"
	RuleAllocationUnitBelowRecommended = "allocation-unit-below-recommendation"
	RulePhysicalSectorUnknown          = "physical-sector-unknown"
	RuleRAIDReshapeRunning             = "raid-reshape-running"
	RuleStripeUnitMeasured             = "stripe-unit-measured"
	RuleStripeUnitDisagrees            = "stripe-unit-disagrees"
)

// Rules lists every rule id, sorted: the vocabulary API filters and docs
// derive from.
func Rules() []string {
	return []string{
		RuleAllocationUnitBelowRecommended,
		RuleDataOffsetStripeUnit,
		RuleFSStripeHintsMismatch,
		RuleFSStripeHintsMissing,
		RuleLVMDataOffsetStripeUnit,
		RuleOffsetPhysicalSector,
		RuleOffsetUnknown,
		RulePartitionOffsetStripeUnit,
		RulePhysicalSectorUnknown,
		RuleRAIDCheckRunning,
		RuleRAIDDegraded,
		RuleRAIDMemberBlocked,
		RuleRAIDMemberErrors,
		RuleRAIDMemberFaulty,
		RuleRAIDMemberRemoved,
		RuleRAIDMismatches,
		RuleRAIDNotRunning,
		RuleRAIDReadOnly,
		RuleRAIDRebuilding,
		RuleRAIDReshapeRunning,
		RuleStripeUnitAllocationUnit,
		RuleStripeUnitDisagrees,
		RuleStripeUnitMeasured,
		RuleStripeUnitUnknown,
	}
}

// IOSizes are the I/O sizes every verdict carries a split fraction for: a
// database page and a read-ahead extent (vocab.IOSizes).
func IOSizes() []uint32 { return vocab.IOSizes() }

// recommendedStart is where a re-created partition should start: 1 MiB, the
// Windows Server 2008+ and parted default, which every common stripe unit divides.
const recommendedStart = 1 << 20

// Evaluate judges one volume. It reads v.Layers (top, the file system, to
// bottom, the disks), v.Filesystem and v.MeasuredStripe and never modifies
// v. A measured stripe unit is judged against when no layer knows one
// (source "measured"); otherwise it confirms the known unit or, when
// confident, is reported as disagreeing with it.
func Evaluate(v *plumblinev1.Volume) *plumblinev1.Alignment {
	return EvaluateWith(v, Overrides{})
}

// RulesVersion numbers the rules of this package: it moves on whenever a
// rule, a threshold or a message changes, so that the server re-judges
// the volumes it judged under an older one.
const RulesVersion = 3

// Overrides adjust the rules where a site judges differently from the
// shipped defaults. The zero value is the shipped rules.
type Overrides struct {
	// Severity replaces the severity of a rule's findings (rule id →
	// critical, warning or info); the verdict follows (a critical finding
	// makes a volume misaligned).
	Severity map[string]string
}

// EvaluateWith is Evaluate under overrides o.
func EvaluateWith(v *plumblinev1.Volume, o Overrides) *plumblinev1.Alignment {
	e := &evaluation{
		v:  v,
		o:  o,
		st: newStack(v),
		a: &plumblinev1.Alignment{
			SplitFraction:            map[uint32]float64{},
			GranularitySplitFraction: map[uint32]float64{},
			SectorRmwFraction:        map[uint32]float64{},
		},
		offsetKnown:   true,
		sectorChecked: true,
	}
	e.a.AllocationUnitBytes = v.GetFilesystem().GetBlockSizeBytes()
	e.stripe = e.st.findStripe()
	e.meas, _ = e.st.measured(v.GetMeasuredStripe())
	if !e.known() && e.meas.m.GetUnitBytes() != 0 && !e.st.declared(e.meas) {
		e.stripe = e.st.measuredStripe(e.meas)
	}
	if e.known() {
		e.a.StripeUnitBytes = e.stripe.unit
		e.a.StripeUnitSource = string(e.stripe.source)
		e.a.StripedDevice = e.stripe.device
		e.checkStripeOffset()
	}
	e.checkSectorOffset()
	e.splitFractions()
	e.useMeasurement()
	e.stripeFindings()
	allocationUnit(&e.f, v)
	reshapes(&e.f, v)
	raidHealth(&e.f, v)
	return e.result()
}

// evaluation is one run of Evaluate: the volume's stack, the alignment
// being built and what the rules could check.
type evaluation struct {
	v      *plumblinev1.Volume
	o      Overrides
	st     *stack
	a      *plumblinev1.Alignment
	f      findings
	stripe stripe
	// meas is the volume's stripe measurement (meas.m nil: none that
	// applies to this stack).
	meas measurement
	// disk is the disk below the volume (nil: none known).
	disk *plumblinev1.Layer
	// offsetKnown is false when a rule could not read the offset it checks;
	// sectorChecked is false when the only rule left had nothing to check.
	offsetKnown, sectorChecked bool
}

func (e *evaluation) known() bool { return e.stripe.unit != 0 }

// checkStripeOffset applies the stripe rule: the data offset on the
// striped device is a multiple of the stripe unit.
func (e *evaluation) checkStripeOffset() {
	st, stripe := e.st, e.stripe
	off, ok := st.offsetAbove(st.primary, stripe.index)
	if !ok {
		e.offsetKnown = false
		e.f.add(RuleOffsetUnknown, Warning,
			fmt.Sprintf("the offset of the file system's data on %s cannot be read: %s", stripe.device, st.unknownOffsetReason(st.primary, stripe.index)),
			"check that the agent can read sysfs and the LVM metadata backups (/etc/lvm/backup); for device-mapper targets other than LVM the offset is not visible in sysfs")
		return
	}
	e.a.DataOffsetBytes = &off
	if off%stripe.unit != 0 {
		st.blameStripeOffset(&e.f, e.v, stripe, off)
	}
}

// checkSectorOffset applies the sector rule: the offset on the disk is a
// multiple of the physical sector.
func (e *evaluation) checkSectorOffset() {
	st, a := e.st, e.a
	disk, diskOff, diskOK := st.diskOffset()
	e.disk = disk
	if disk != nil {
		a.PhysicalSectorBytes = disk.GetPhysicalSectorBytes()
	}
	switch {
	case disk == nil:
		if !e.known() {
			// Nothing below the file system: neither rule has anything to check.
			e.offsetKnown = false
			e.f.add(RuleOffsetUnknown, Warning,
				"no device below the file system is known, so neither the stripe-unit nor the physical-sector rule could be checked: "+st.unknownOffsetReason(st.primary, len(st.primary)),
				"check that the agent can read sysfs (/sys/dev/block) for this mount's device")
		}
	case !diskOK:
		if e.offsetKnown {
			// Without a stripe rule this is what decides the verdict.
			e.offsetKnown = false
			e.f.add(RuleOffsetUnknown, Warning,
				fmt.Sprintf("the offset of the file system's data on %s cannot be read: %s", diskWord(disk), st.diskOffsetReason()),
				"check that the agent can read sysfs and the LVM metadata backups (/etc/lvm/backup)")
		}
	default:
		a.DiskOffsetBytes = &diskOff
		ps := uint64(disk.GetPhysicalSectorBytes())
		if ps == 0 && !e.known() {
			// The sector rule is the only rule left, and it has nothing
			// to check against: "aligned" would mean nothing was checked.
			e.sectorChecked = false
			e.f.add(RulePhysicalSectorUnknown, Warning,
				fmt.Sprintf("the physical sector size of %s is unknown (%s) and no stripe unit is known, so no alignment rule could be checked",
					disk.GetDevice(), unknownReason(disk, "physical_sector_bytes", "not reported")),
				"check that the agent can read sysfs (queue/physical_block_size) or the disk's IOCTL_STORAGE_QUERY_PROPERTY; declare the array if the disk is hardware RAID")
		}
		if ps != 0 && diskOff%ps != 0 {
			e.f.add(RuleOffsetPhysicalSector, Critical,
				fmt.Sprintf("data starts at byte %d of disk %s (%s), not a multiple of its %d-byte physical sector: every write smaller than %d bytes becomes a read-modify-write inside the drive",
					diskOff, disk.GetDevice(), human(diskOff), ps, ps),
				st.repartitionRemedy(e.v, disk.GetDevice(), lcm(ps, recommendedStart), uint64(disk.GetLogicalSectorBytes())))
		}
	}
}

// splitFractions fills the split fractions of every I/O size: against
// the stripe unit and the physical sector.
func (e *evaluation) splitFractions() {
	a, fs := e.a, e.v.GetFilesystem()
	for _, size := range IOSizes() {
		grid := gridFor(uint64(size), fs)
		if e.known() && a.DataOffsetBytes != nil {
			a.SplitFraction[uint32(size)], a.GranularitySplitFraction[uint32(size)] = SplitShares(*a.DataOffsetBytes, uint64(size), grid, e.stripe.unit)
		}
		if a.DiskOffsetBytes != nil && a.PhysicalSectorBytes != 0 {
			a.SectorRmwFraction[uint32(size)] = RMWFraction(*a.DiskOffsetBytes, uint64(size), grid, uint64(a.PhysicalSectorBytes))
		}
	}
}

// stripeFindings says what is known of the stripe: how to declare it when
// nothing is, how it fits the allocation unit and the hints when it is.
func (e *evaluation) stripeFindings() {
	if e.known() {
		switch {
		case e.stripe.source == vocab.SourceMeasured:
			// An inference is confirmed by declaring it; stripe hints
			// wait for that.
			e.measuredFinding()
		case e.disagrees():
			e.disagreeFinding()
		}
		unitVsAllocation(&e.f, e.v, e.stripe)
		if e.stripe.source != vocab.SourceMeasured {
			stripeHints(&e.f, e.v, e.stripe)
		}
		return
	}
	if e.disagrees() {
		e.disagreeFinding()
	}
	disk := e.disk
	devKey := "/dev/" + deviceOr(disk, "sdX")
	if windowsFS(e.v.GetFilesystem().GetType()) {
		devKey = deviceOr(disk, "PhysicalDriveN")
	}
	checked := ", so only the physical-sector rule was checked"
	if !e.sectorChecked || !e.offsetKnown {
		checked = ""
	}
	e.f.add(RuleStripeUnitUnknown, Info,
		"no RAID layer or stripe hint is known for this volume"+checked+e.noneWord(),
		fmt.Sprintf("if %s sits on hardware RAID, declare it in the agent config: declared_devices: [{device: %s, raid: {level: raid10, stripe_unit: 64KiB, disks: 4}}]",
			deviceOr(disk, "the disk"), devKey))
}

// result sets the verdict from the findings and what could be checked.
func (e *evaluation) result() *plumblinev1.Alignment {
	a := e.a
	a.Findings = e.f.list
	for _, f := range a.Findings {
		if sev, ok := e.o.Severity[f.GetRule()]; ok {
			f.Severity = sev
		}
	}
	switch {
	case e.f.hasAlignment(Critical):
		a.Verdict = Misaligned
	case !e.offsetKnown || !e.sectorChecked || e.disk == nil && !e.known():
		a.Verdict = Unknown
	default:
		a.Verdict = Aligned
	}
	if len(a.SplitFraction) == 0 {
		a.SplitFraction = nil
	}
	if len(a.GranularitySplitFraction) == 0 {
		a.GranularitySplitFraction = nil
	}
	if len(a.SectorRmwFraction) == 0 {
		a.SectorRmwFraction = nil
	}
	return a
}

// gridFor is the placement grid of I/Os of size s: min(s, allocation
// granularity). The allocation granularity is the file system's block
// (cluster) size, or its stripe unit when stripe hints are set, since the
// allocator then aligns extents to it. Unknown: assume I/Os are placed on
// multiples of their own size.
func gridFor(s uint64, fs *plumblinev1.Filesystem) uint64 {
	alloc := uint64(fs.GetBlockSizeBytes())
	if su := fs.GetStripeUnitBytes(); su > alloc {
		alloc = su
	}
	if alloc == 0 || alloc > s {
		return s
	}
	return alloc
}

// diskWord names where the data lands: "disk sda", or "the disks below md0"
// when the chain stops above them.
func diskWord(l *plumblinev1.Layer) string {
	if presentsDisk(l) {
		return "disk " + l.GetDevice()
	}
	return "the disks below " + l.GetDevice()
}

// unknownReason is the reason a layer gives for an unknown field, or def.
func unknownReason(l *plumblinev1.Layer, field, def string) string {
	for _, u := range l.GetUnknown() {
		if u.GetField() == field {
			return u.GetReason()
		}
	}
	return def
}

func deviceOr(l *plumblinev1.Layer, def string) string {
	if l == nil || l.GetDevice() == "" {
		return def
	}
	return l.GetDevice()
}

// findings collects findings in rule order.
type findings struct{ list []*plumblinev1.Finding }

func (f *findings) add(rule, severity, message, remediation string) {
	f.list = append(f.list, &plumblinev1.Finding{Rule: rule, Severity: severity, Message: message, Remediation: remediation})
}

// hasAlignment says whether an alignment rule (not a health rule) found
// something of severity: health findings never decide the verdict.
func (f *findings) hasAlignment(severity string) bool {
	return slices.ContainsFunc(f.list, func(x *plumblinev1.Finding) bool {
		return x.Severity == severity && !IsHealthRule(x.Rule)
	})
}

// human writes a byte count the way the domain talks about it: 32256 bytes
// is "31.5 KiB", 1048576 is "1 MiB".
func human(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return trimFloat(float64(n)/(1<<20)) + " MiB"
	case n >= 1<<10:
		return trimFloat(float64(n)/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%d B", n)
}

func trimFloat(x float64) string {
	s := fmt.Sprintf("%.2f", x)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func pct(x float64) string { return trimFloat(x*100) + "%" }
