package align

import (
	"fmt"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// recommendedCluster is Microsoft's allocation unit for SQL Server data
// volumes; Linux file systems keep their block at the 4 KiB page size.
const (
	recommendedCluster      = 64 << 10
	recommendedLinuxBlock   = 4 << 10
	defaultExt4BlockForHint = 4 << 10
)

// unitVsAllocation: the stripe unit must be a multiple of the allocation
// unit, or clusters straddle stripe units however well the offset is chosen.
func unitVsAllocation(f *findings, v *plumblinev1.Volume, st stripe) {
	cluster := uint64(v.GetFilesystem().GetBlockSizeBytes())
	if cluster == 0 || st.unit%cluster == 0 {
		return
	}
	fix := fmt.Sprintf("re-create the file system with an allocation unit that divides %s", human(st.unit))
	if windowsFS(v.GetFilesystem().GetType()) {
		fix = fmt.Sprintf("move the data off and re-format with an allocation unit that divides %s: format %s /FS:%s /A:%dK /Q",
			human(st.unit), formatTarget(v), strings.ToUpper(v.GetFilesystem().GetType()), gcd(st.unit, recommendedCluster)>>10)
	}
	f.add(RuleStripeUnitAllocationUnit, Warning,
		fmt.Sprintf("the %s stripe unit of %s is not a multiple of the %s allocation unit: some clusters straddle two stripe units",
			human(st.unit), st.device, human(cluster)),
		fix)
}

// stripeHints: XFS sunit/swidth and ext4 stride/stripe_width should match
// the RAID chunk and data-disk count, so the allocator places extents on
// stripe boundaries. A mismatch is a warning; it does not change the verdict.
func stripeHints(f *findings, v *plumblinev1.Volume, st stripe) {
	fs := v.GetFilesystem()
	typ := fs.GetType()
	if st.fromFS || (typ != "xfs" && !strings.HasPrefix(typ, "ext")) {
		return
	}
	su, sw := fs.GetStripeUnitBytes(), fs.GetStripeWidthBytes()
	wantSW := st.unit * uint64(st.dataDisks)
	what := fmt.Sprintf("%s is %s with a %s stripe unit", st.device, orWord(st.raidLevel, "striped"), human(st.unit))
	if st.dataDisks > 0 {
		what += fmt.Sprintf(" and %d data disks", st.dataDisks)
	}
	fix := stripeHintRemedy(v, st)
	switch {
	case su == 0 && sw == 0:
		f.add(RuleFSStripeHintsMissing, Info,
			fmt.Sprintf("the %s file system has no stripe hints, but %s: the allocator does not know the stripe geometry", typ, what),
			fix)
	case su != st.unit || (st.dataDisks > 0 && sw != wantSW):
		f.add(RuleFSStripeHintsMismatch, Warning,
			fmt.Sprintf("the %s stripe hints say unit %s, width %s, but %s (expected unit %s, width %s)",
				typ, human(su), human(sw), what, human(st.unit), widthWord(wantSW)),
			fix)
	}
}

func stripeHintRemedy(v *plumblinev1.Volume, st stripe) string {
	fs := v.GetFilesystem()
	disks := st.dataDisks
	if disks == 0 {
		disks = 1
	}
	dev := v.GetDevice()
	if fs.GetType() == "xfs" {
		return fmt.Sprintf("at format time: mkfs.xfs -d su=%dk,sw=%d %s; on the existing file system: mount -o sunit=%d,swidth=%d (512-byte units)",
			st.unit>>10, disks, dev, st.unit/512, st.unit*uint64(disks)/512)
	}
	block := uint64(fs.GetBlockSizeBytes())
	note := ""
	if block == 0 {
		block = defaultExt4BlockForHint
		note = " (assuming 4 KiB blocks)"
	}
	stride := st.unit / block
	return fmt.Sprintf("tune2fs -E stride=%d,stripe_width=%d %s%s (mkfs.ext4 -E stride=%d,stripe_width=%d at format time)",
		stride, stride*uint64(disks), dev, note, stride, stride*uint64(disks))
}

// allocationUnit: database data volumes want 64 KiB clusters on Windows
// (SQL Server's extent); on Linux the block should be the 4 KiB page.
func allocationUnit(f *findings, v *plumblinev1.Volume) {
	fs := v.GetFilesystem()
	bs := uint64(fs.GetBlockSizeBytes())
	if bs == 0 {
		return
	}
	if windowsFS(fs.GetType()) {
		if bs < recommendedCluster {
			f.add(RuleAllocationUnitBelowRecommended, Info,
				fmt.Sprintf("the %s allocation unit is %s; 64 KiB is recommended for database data volumes", strings.ToUpper(fs.GetType()), human(bs)),
				fmt.Sprintf("move the data off and re-format: format %s /FS:%s /A:64K /Q", formatTarget(v), strings.ToUpper(fs.GetType())))
		}
		return
	}
	if bs < recommendedLinuxBlock && (fs.GetType() == "xfs" || strings.HasPrefix(fs.GetType(), "ext")) {
		f.add(RuleAllocationUnitBelowRecommended, Info,
			fmt.Sprintf("the %s block size is %s; database data volumes want the 4 KiB page size", fs.GetType(), human(bs)),
			fmt.Sprintf("re-create the file system with 4 KiB blocks (mkfs.%s -b %s %s)", fs.GetType(), blockFlag(fs.GetType()), v.GetDevice()))
	}
}

func blockFlag(typ string) string {
	if typ == "xfs" {
		return "size=4096"
	}
	return "4096"
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func widthWord(n uint64) string {
	if n == 0 {
		return "unknown"
	}
	return human(n)
}

// formatTarget is what format.exe is given: the volume's drive letter
// (D:) or its mount folder, X: when neither is known.
func formatTarget(v *plumblinev1.Volume) string {
	mp := v.GetMountPoint()
	switch {
	case len(mp) == 3 && mp[1] == ':' && mp[2] == '\\':
		return mp[:2]
	case len(mp) > 3 && mp[1] == ':':
		return mp
	}
	return "X:"
}

// reshapes: an md array being reshaped has two geometries at once; the
// verdict is judged against the new one, which the data moved so far
// already has. Say so, with the old values, wherever the verdict is shown.
func reshapes(f *findings, v *plumblinev1.Volume) {
	for _, l := range v.GetLayers() {
		r := l.GetReshape()
		if r == nil {
			continue
		}
		var changes []string
		if r.GetPreviousRaidDisks() != 0 {
			changes = append(changes, fmt.Sprintf("raid_disks %d -> %d", r.GetPreviousRaidDisks(), l.GetRaidDisks()))
		}
		if r.GetPreviousStripeUnitBytes() != 0 {
			changes = append(changes, fmt.Sprintf("chunk %s -> %s", human(r.GetPreviousStripeUnitBytes()), widthWord(l.GetStripeUnitBytes())))
		}
		if r.GetPreviousRaidLayout() != "" {
			changes = append(changes, fmt.Sprintf("layout %s -> %s", r.GetPreviousRaidLayout(), orWord(l.GetRaidLayout(), "unknown")))
		}
		what := "its geometry"
		if len(changes) > 0 {
			what = strings.Join(changes, ", ")
		}
		if h := l.GetRaidHealth(); h.GetSyncAction() == vocab.MDReshape {
			what += "; " + progress(h)
		}
		f.add(RuleRAIDReshapeRunning, Warning,
			fmt.Sprintf("%s %s is being reshaped (%s): the verdict and split figures use the new geometry; data not yet moved still has the old one, and the array is slower until the reshape ends",
				orWord(l.GetRaidLevel(), "array"), nameOr(l), what),
			fmt.Sprintf("nothing to change while the reshape runs (watch it in /proc/mdstat or /sys/block/%s/md/reshape_position); the verdict is final once it ends", l.GetDevice()))
	}
}
