package align

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// stack walks a volume's layers. Layers come top to bottom, depth first; a
// layer's children are named in `below`, or, when it names none, are the
// next layer in the list — except for disks and declared arrays, which are
// leaves.
type stack struct {
	layers  []*plumblinev1.Layer
	primary []int // indices from the file system down to one disk, first child each time
}

func newStack(v *plumblinev1.Volume) *stack {
	s := &stack{layers: v.GetLayers()}
	seen := make(map[int]bool)
	for i := 0; i >= 0 && i < len(s.layers) && !seen[i]; i = s.child(i) {
		seen[i] = true
		s.primary = append(s.primary, i)
	}
	return s
}

// child returns the index of layer i's first child, or -1 for a leaf.
func (s *stack) child(i int) int {
	l := s.layers[i]
	if below := l.GetBelow(); len(below) > 0 {
		for j := i + 1; j < len(s.layers); j++ {
			if s.layers[j].GetDevice() == below[0] {
				return j
			}
		}
		return -1
	}
	if isLeaf(l) || i+1 >= len(s.layers) {
		return -1
	}
	return i + 1
}

func isLeaf(l *plumblinev1.Layer) bool {
	return kindOf(l) == vocab.LayerDisk || kindOf(l) == vocab.LayerRAID && len(l.GetBelow()) == 0 && vocab.Source(l.GetSource()) == vocab.SourceDeclared
}

// presentsDisk says whether the bottom layer of a path is what the data
// finally lands on as far as the OS can tell: a disk, or an array that
// presents itself as one (declared hardware RAID, a Storage Spaces virtual
// disk whose pool members are not listed). Any other layer at the bottom
// means the chain stopped early: the devices below it are unknown.
func presentsDisk(l *plumblinev1.Layer) bool {
	return isLeaf(l) || kindOf(l) == vocab.LayerRAID && len(l.GetBelow()) == 0 && vocab.Source(l.GetSource()) == vocab.SourceWMI
}

// stripe is the striped layer a verdict is judged against.
type stripe struct {
	unit      uint64
	dataDisks uint32
	source    vocab.Source
	device    string
	index     int  // position in the primary path; offsets above it count
	fromFS    bool // the unit is the file system's own stripe hint
	raidLevel string
	layerKind vocab.LayerKind
	// confidence is the geometry probe's, for a measured unit.
	confidence float64
}

// sourceOf is where layer l's value of field came from: its own source,
// else the layer's.
func sourceOf(l *plumblinev1.Layer, field string) vocab.Source {
	if s := l.GetSources()[field]; s != "" {
		return vocab.Source(s)
	}
	return vocab.Source(l.GetSource())
}

// kindOf is layer l's kind.
func kindOf(l *plumblinev1.Layer) vocab.LayerKind { return vocab.LayerKind(l.GetKind()) }

// findStripe picks the stripe unit: the topmost layer below the file system
// with RAID geometry (md, a striped LV, declared hardware RAID); else the
// deepest layer whose kernel hint says minimum_io_size exceeds the physical
// sector (hardware RAID that reports its chunk); else the file system's own
// stripe hints, judged against the disk.
func (s *stack) findStripe() stripe {
	for pi, li := range s.primary {
		l := s.layers[li]
		if kindOf(l) == vocab.LayerFilesystem || l.GetStripeUnitBytes() == 0 {
			continue
		}
		return stripe{
			unit: l.GetStripeUnitBytes(), dataDisks: l.GetRaidDataDisks(),
			source: sourceOf(l, "stripe_unit_bytes"), device: l.GetDevice(), index: pi,
			raidLevel: l.GetRaidLevel(), layerKind: kindOf(l),
		}
	}
	for pi := len(s.primary) - 1; pi > 0; pi-- {
		l := s.layers[s.primary[pi]]
		minIO, phys := uint64(l.GetMinIoBytes()), uint64(l.GetPhysicalSectorBytes())
		if phys == 0 || minIO <= phys || minIO%phys != 0 {
			continue
		}
		var disks uint32
		if opt := uint64(l.GetOptIoBytes()); opt > minIO && opt%minIO == 0 {
			disks = uint32(opt / minIO)
		}
		return stripe{unit: minIO, dataDisks: disks, source: vocab.SourceKernelHint, device: l.GetDevice(), index: pi, layerKind: kindOf(l)}
	}
	if len(s.layers) > 0 && len(s.primary) > 1 {
		fsl := s.layers[s.primary[0]]
		if su := fsl.GetStripeUnitBytes(); su != 0 {
			last := len(s.primary) - 1
			var disks uint32
			if sw := fsl.GetStripeWidthBytes(); sw > su && sw%su == 0 {
				disks = uint32(sw / su)
			}
			return stripe{unit: su, dataDisks: disks, source: sourceOf(fsl, "stripe_unit_bytes"),
				device: s.layers[s.primary[last]].GetDevice(), index: last, fromFS: true, layerKind: kindOf(s.layers[s.primary[last]])}
		}
	}
	return stripe{}
}

// offsetAbove sums the offsets of the layers above position idx of path:
// where the file system's data starts on that layer's device. A sum that
// does not fit in 64 bits is not known (a wrapped sum could pass for
// aligned); unknownOffsetReason says so.
func (s *stack) offsetAbove(path []int, idx int) (uint64, bool) {
	var sum uint64
	for pi := 0; pi < idx; pi++ {
		l := s.layers[path[pi]]
		switch {
		case l.OffsetBytes != nil:
			var carry uint64
			if sum, carry = bits.Add64(sum, l.GetOffsetBytes(), 0); carry != 0 {
				return 0, false
			}
		case kindOf(l) == vocab.LayerFilesystem:
			// A file system starts at the start of its device.
		default:
			return 0, false
		}
	}
	return sum, true
}

// unknownOffsetReason names the first layer above idx whose offset is
// unknown, and why, or says that the offsets overflow.
func (s *stack) unknownOffsetReason(path []int, idx int) string {
	var sum uint64
	for pi := 0; pi < idx && pi < len(path); pi++ {
		l := s.layers[path[pi]]
		if l.OffsetBytes != nil {
			var carry uint64
			if sum, carry = bits.Add64(sum, l.GetOffsetBytes(), 0); carry != 0 {
				return fmt.Sprintf("the offsets of the layers down to %s %s add up to more than 2^64-1 bytes", l.GetKind(), nameOr(l))
			}
			continue
		}
		if kindOf(l) == vocab.LayerFilesystem {
			continue
		}
		for _, u := range l.GetUnknown() {
			if u.GetField() == "offset_bytes" {
				return fmt.Sprintf("%s layer %s: %s", l.GetKind(), l.GetDevice(), u.GetReason())
			}
		}
		return fmt.Sprintf("%s layer %s does not say where its data starts", l.GetKind(), l.GetDevice())
	}
	return "no layer below the file system"
}

// diskOffset returns the disk at the bottom of the primary path and the
// offset of the file system's data on it.
func (s *stack) diskOffset() (*plumblinev1.Layer, uint64, bool) {
	if len(s.primary) < 2 {
		return nil, 0, false
	}
	last := len(s.primary) - 1
	disk := s.layers[s.primary[last]]
	if !presentsDisk(disk) {
		// The chain stops at an md, dm or LVM layer whose devices below
		// are unknown: its own data offset and the partitions under it
		// are not in the sum, so no offset on a disk is known.
		return disk, 0, false
	}
	off, ok := s.offsetAbove(s.primary, last)
	return disk, off, ok
}

// diskOffsetReason says why diskOffset found no offset on a disk.
func (s *stack) diskOffsetReason() string {
	last := len(s.primary) - 1
	disk := s.layers[s.primary[last]]
	if !presentsDisk(disk) {
		why := "it lists none"
		for _, u := range disk.GetUnknown() {
			if u.GetField() == "below" {
				why = u.GetReason()
				break
			}
		}
		return fmt.Sprintf("the devices below %s layer %s are unknown (%s)", disk.GetKind(), disk.GetDevice(), why)
	}
	return s.unknownOffsetReason(s.primary, last)
}

// blameStripeOffset adds a finding for each layer whose offset puts the data
// off the stripe grid, with the fix that layer needs.
func (s *stack) blameStripeOffset(f *findings, v *plumblinev1.Volume, st stripe, total uint64) {
	// "1.2% of 8 KiB and 9.4% of 64 KiB I/Os ...", one part per I/O size.
	var offs, grans []string
	granular := false
	for _, size := range IOSizes() {
		off, gran := SplitShares(total, uint64(size), gridFor(uint64(size), v.GetFilesystem()), st.unit)
		offs = append(offs, fmt.Sprintf("%s of %d KiB", pct(off), size>>10))
		grans = append(grans, pct(gran))
		granular = granular || gran > 0
	}
	effect := strings.Join(offs, " and ") + " I/Os straddle two stripe units because of this offset"
	if granular {
		effect += " (on top of the " + strings.Join(grans, " and ") + " that the allocation unit splits at any offset)"
	}
	blamed := false
	for pi := 0; pi < st.index; pi++ {
		l := s.layers[s.primary[pi]]
		off := l.GetOffsetBytes()
		if off%st.unit == 0 {
			continue
		}
		blamed = true
		switch kindOf(l) {
		case vocab.LayerPartition:
			parent := st.device
			if pi+1 < len(s.primary) {
				parent = s.layers[s.primary[pi+1]].GetDevice()
			}
			f.add(RulePartitionOffsetStripeUnit, Critical,
				fmt.Sprintf("partition %s starts at byte %d (%s), not a multiple of the %s stripe unit of %s%s: %s",
					l.GetDevice(), off, human(off), human(st.unit), st.device, stripeOrigin(st), effect),
				s.repartitionRemedy(v, parent, lcm(st.unit, recommendedStart), uint64(l.GetLogicalSectorBytes())))
		case vocab.LayerLVM:
			f.add(RuleLVMDataOffsetStripeUnit, Critical,
				fmt.Sprintf("LVM volume %s starts its data at byte %d (%s) of its physical volume (pe_start plus the segment's first extent), not a multiple of the %s stripe unit of %s%s: %s",
					nameOr(l), off, human(off), human(st.unit), st.device, stripeOrigin(st), effect),
				fmt.Sprintf("move the data off, then re-create the physical volume with an aligned data area: pvcreate --dataalignment %dk /dev/%s, with an extent size that is a multiple of %s (vgcreate -s 4m), and restore",
					lcm(st.unit, recommendedStart)>>10, s.layers[s.primary[pi+1]].GetDevice(), human(st.unit)))
		default:
			f.add(RuleDataOffsetStripeUnit, Critical,
				fmt.Sprintf("%s layer %s starts its data at byte %d (%s) of the device below, not a multiple of the %s stripe unit of %s%s: %s",
					l.GetKind(), nameOr(l), off, human(off), human(st.unit), st.device, stripeOrigin(st), effect),
				fmt.Sprintf("re-create the %s mapping of %s with a data offset that is a multiple of %s (1 MiB suits every common stripe unit)", l.GetKind(), nameOr(l), human(st.unit)))
		}
	}
	if !blamed {
		f.add(RuleDataOffsetStripeUnit, Critical,
			fmt.Sprintf("the file system's data starts at byte %d (%s) of %s, not a multiple of its %s stripe unit%s: %s", total, human(total), st.device, human(st.unit), stripeOrigin(st), effect),
			"re-create the layers above "+st.device+" so that each starts on a 1 MiB boundary")
	}
}

func stripeOrigin(st stripe) string {
	switch {
	case st.fromFS:
		return fmt.Sprintf(" (from the file system's stripe hints, %s)", st.source)
	case st.source == vocab.SourceKernelHint:
		return " (from the kernel's minimum_io_size hint)"
	case st.source == vocab.SourceMeasured:
		return fmt.Sprintf(" (inferred by the geometry probe, confidence %s)", confidence(st.confidence))
	case st.raidLevel != "":
		return fmt.Sprintf(" (%s, %s)", st.raidLevel, st.source)
	}
	return ""
}

func nameOr(l *plumblinev1.Layer) string {
	if l.GetName() != "" {
		return l.GetName()
	}
	return l.GetDevice()
}

// repartitionRemedy is the fix for a partition that starts in the wrong place.
func (s *stack) repartitionRemedy(v *plumblinev1.Volume, disk string, alignTo, logical uint64) string {
	if logical == 0 {
		logical = 512
	}
	if windowsFS(v.GetFilesystem().GetType()) {
		return fmt.Sprintf("a partition keeps its offset for life: move the data off, then in diskpart: select disk %s; create partition primary align=%d; format fs=%s unit=64K quick; and restore",
			windowsDiskNumber(disk), alignTo>>10, strings.ToLower(v.GetFilesystem().GetType()))
	}
	return fmt.Sprintf("a partition keeps its offset for life: move the data off, re-create the partition at a %s boundary (parted -s /dev/%s unit s mkpart primary %ds 100%%: %d sectors of %d bytes), re-create the file system, and restore",
		human(alignTo), disk, alignTo/logical, alignTo/logical, logical)
}

func windowsFS(t string) bool {
	switch strings.ToLower(t) {
	case "ntfs", "refs", "fat32", "exfat":
		return true
	}
	return false
}

// windowsDiskNumber is diskpart's number of a Windows disk layer
// (PhysicalDrive2 is disk 2), or N when the name is not one.
func windowsDiskNumber(device string) string {
	const prefix = "PhysicalDrive"
	n := strings.TrimPrefix(device, prefix)
	if n == device || n == "" || strings.Trim(n, "0123456789") != "" {
		return "N"
	}
	return n
}
