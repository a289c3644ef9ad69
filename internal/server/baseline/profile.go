// Package baseline judges probe latencies against three references
// (DESIGN.md §4): priors per storage profile, shipped as data
// (priors.yaml); the volume's own history (median and MAD over a rolling
// window of per-run medians); and the cohort, every volume of the same
// profile across the fleet. A Detector turns a series of runs into a
// degradation state with hysteresis.
//
// The package is pure: no I/O, no clocks, no globals. Callers pass times
// and latencies in and persist the Detector's state themselves.
package baseline

import (
	"fmt"
	"math"
	"strings"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Media is the class of the disks under a volume.
type Media string

// Media classes, slowest first.
const (
	HDD7200 Media = "hdd-7200"
	HDD10K  Media = "hdd-10k"
	HDD15K  Media = "hdd-15k"
	SATASSD Media = "sata-ssd"
	SASSSD  Media = "sas-ssd"
	NVMe    Media = "nvme"
	// UnknownMedia is a volume whose disks could not be classified.
	UnknownMedia Media = "unknown"
)

// MediaClasses lists every media class, slowest first, UnknownMedia last.
func MediaClasses() []Media {
	return []Media{HDD7200, HDD10K, HDD15K, SATASSD, SASSSD, NVMe, UnknownMedia}
}

// ParseMedia accepts a media class name, as an operator would declare it.
func ParseMedia(s string) (Media, error) {
	for _, m := range MediaClasses() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("media class %q: want one of %v", s, MediaClasses())
}

func (m Media) rank() int {
	for i, c := range MediaClasses() {
		if c == m {
			return i
		}
	}
	return len(MediaClasses())
}

// OffsetClass says where a volume's data starts relative to its stripe unit.
type OffsetClass string

// Offset classes.
const (
	// Aligned: the data offset is a multiple of the stripe unit (and of
	// the physical sector), or there is nothing to split against.
	Aligned OffsetClass = "aligned"
	// Legacy315K: the data starts 63 sectors (32,256 bytes) in, the
	// Windows Server 2003 default.
	Legacy315K OffsetClass = "legacy-31.5k"
	// MisalignedOther: any other offset the alignment rules reject.
	MisalignedOther OffsetClass = "misaligned-other"
	// UnknownOffset: an offset on the way could not be read.
	UnknownOffset OffsetClass = "unknown"
)

// legacyOffset is 63 × 512 bytes.
const legacyOffset = 63 * 512

// NoRAID is the RAID level of a volume with no RAID or striped layer.
const NoRAID = vocab.NoRAID

// Profile is what makes two volumes comparable: media class × RAID level ×
// stripe unit × offset class × allocation unit.
type Profile struct {
	Media          Media
	RAIDLevel      string      // raid0, raid1, raid10, raid5, ...; NoRAID when there is none
	StripeUnit     uint64      // bytes; 0 when none is known
	Offset         OffsetClass //
	AllocationUnit uint32      // bytes; 0 when unknown
	// Split8K is the predicted share of 8 KiB I/Os that straddle a stripe
	// unit, whatever the cause (align.SplitFraction: the offset-caused
	// split plus the allocation-granularity split), since every split I/O
	// costs the same. It is not part of the key: within misaligned-other
	// it varies with the offset.
	Split8K float64
}

// Key is the stable profile string, fields joined by "/":
// media/raid/stripe/offset/allocation, "-" for an unknown size, sizes in
// IEC units: "nvme/none/-/aligned/4KiB", "hdd-15k/raid10/64KiB/legacy-31.5k/64KiB".
func (p Profile) Key() string {
	raid := p.RAIDLevel
	if raid == "" {
		raid = NoRAID
	}
	media, off := p.Media, p.Offset
	if media == "" {
		media = UnknownMedia
	}
	if off == "" {
		off = UnknownOffset
	}
	return strings.Join([]string{string(media), raid, sizeWord(p.StripeUnit), string(off), sizeWord(uint64(p.AllocationUnit))}, "/")
}

func (p Profile) String() string { return p.Key() }

func sizeWord(n uint64) string {
	if n == 0 {
		return "-"
	}
	return bytesize.Size(n).String()
}

// JudgedProfile is the profile a volume was judged with, as its judged
// record stores it: the profile's key (Key) and the volume's split
// fractions per I/O size (vocab.IOSizes order; -1 unknown), the
// offset-caused and the granularity split, which give Split8K. The server
// reads a volume's profile so rather than judging its geometry again
// (ProfileOf). Key(JudgedProfile(k, ...)) is k.
func JudgedProfile(key string, split, granularity [vocab.NumIOSizes]float64) (Profile, error) {
	p, err := parseKey(key)
	if err != nil {
		return Profile{}, err
	}
	if i, ok := vocab.IOSizeIndex(8 << 10); ok {
		p.Split8K = max(split[i], 0) + max(granularity[i], 0)
	}
	return p, nil
}

// parseKey is the profile whose Key is key, Split8K 0. A RAID level may
// hold a "/": the other fields never do.
func parseKey(key string) (Profile, error) {
	f := strings.Split(key, "/")
	if len(f) < 5 {
		return Profile{}, fmt.Errorf("profile %q: want media/raid/stripe/offset/allocation", key)
	}
	n := len(f)
	media, err := ParseMedia(f[0])
	if err != nil {
		return Profile{}, fmt.Errorf("profile %q: %w", key, err)
	}
	p := Profile{Media: media, RAIDLevel: strings.Join(f[1:n-3], "/"), Offset: OffsetClass(f[n-2])}
	switch p.Offset {
	case Aligned, Legacy315K, MisalignedOther, UnknownOffset:
	default:
		return Profile{}, fmt.Errorf("profile %q: offset class %q: want one of %s, %s, %s, %s", key, f[n-2], Aligned, Legacy315K, MisalignedOther, UnknownOffset)
	}
	if p.StripeUnit, err = parseSizeWord(f[n-3]); err != nil {
		return Profile{}, fmt.Errorf("profile %q: stripe unit: %w", key, err)
	}
	au, err := parseSizeWord(f[n-1])
	if err != nil || au > math.MaxUint32 {
		return Profile{}, fmt.Errorf("profile %q: allocation unit %q: %v", key, f[n-1], err)
	}
	p.AllocationUnit = uint32(au)
	if p.Key() != key {
		return Profile{}, fmt.Errorf("profile %q: not a key Key writes (it would be %q)", key, p.Key())
	}
	return p, nil
}

// parseSizeWord reads what sizeWord writes.
func parseSizeWord(w string) (uint64, error) {
	if w == "-" {
		return 0, nil
	}
	n, err := bytesize.Parse(w)
	return uint64(n), err
}

// ProfileOf derives a volume's profile from its geometry and its
// alignment a (the judge's, or the agent's own in v.Alignment when a is
// nil). It applies no rule itself: on the server the judge alone does.
func ProfileOf(v *plumblinev1.Volume, a *plumblinev1.Alignment) Profile {
	if a == nil {
		a = v.GetAlignment()
	}
	p := Profile{
		Media:          MediaOf(v),
		RAIDLevel:      raidLevelOf(v, a),
		StripeUnit:     a.GetStripeUnitBytes(),
		Offset:         OffsetClassOf(a),
		AllocationUnit: a.GetAllocationUnitBytes(),
		Split8K:        a.GetSplitFraction()[8<<10] + a.GetGranularitySplitFraction()[8<<10],
	}
	if p.AllocationUnit == 0 {
		p.AllocationUnit = v.GetFilesystem().GetBlockSizeBytes()
	}
	return p
}

// raidLevelOf is the level of the striped device the verdict was judged
// against, else the topmost layer that names a level.
func raidLevelOf(v *plumblinev1.Volume, a *plumblinev1.Alignment) string {
	var first string
	for _, l := range v.GetLayers() {
		lvl := strings.ToLower(l.GetRaidLevel())
		if lvl == "" {
			continue
		}
		if a.GetStripedDevice() != "" && l.GetDevice() == a.GetStripedDevice() {
			return lvl
		}
		if first == "" {
			first = lvl
		}
	}
	if first == "" {
		return NoRAID
	}
	return first
}

// OffsetClassOf classifies an alignment verdict's data offset.
func OffsetClassOf(a *plumblinev1.Alignment) OffsetClass {
	if a.DataOffsetBytes != nil && a.GetDataOffsetBytes() == legacyOffset ||
		a.DiskOffsetBytes != nil && a.GetDiskOffsetBytes() == legacyOffset {
		if a.GetVerdict() != align.Aligned {
			return Legacy315K
		}
	}
	if a.GetStripeUnitBytes() != 0 {
		if a.DataOffsetBytes == nil {
			return UnknownOffset
		}
		if a.GetDataOffsetBytes()%a.GetStripeUnitBytes() != 0 {
			return MisalignedOther
		}
	}
	if ps := uint64(a.GetPhysicalSectorBytes()); ps != 0 && a.DiskOffsetBytes != nil && a.GetDiskOffsetBytes()%ps != 0 {
		return MisalignedOther
	}
	if a.GetVerdict() == align.Unknown || a.GetVerdict() == "" {
		return UnknownOffset
	}
	return Aligned
}

// MediaOf classifies the disks under a volume. Declared facts win: a layer
// whose rotational flag or model has the source "declared" (operator
// config for hardware RAID) decides alone. Otherwise every leaf disk is
// classified from its kernel name, rotational flag and model, and the
// slowest class wins; a disk that cannot be classified makes the volume
// UnknownMedia.
//
//   - cloud and virtual disks (EBS, GCE PersistentDisk, Hyper-V, QEMU,
//     loop and RAM devices):
//     unknown — their latency is the network's, not a media class's.
//   - nvme* device names, or "NVMe" in the model: NVMe.
//   - not rotational: SAS SSD when the model names a SAS SSD family, else
//     SATA SSD (the common case for a non-NVMe SSD).
//   - rotational: 15K or 10K when the model says so (a "15K"/"10K" word or a
//     known enterprise family); else 7,200 rpm — the most common and the
//     slowest class, so its prior never calls a healthy disk slow.
//   - rotational flag unknown: classified from the model alone, else unknown.
func MediaOf(v *plumblinev1.Volume) Media {
	layers := v.GetLayers()
	for _, l := range layers {
		if vocab.Source(l.GetSources()["rotational"]) == vocab.SourceDeclared || vocab.Source(l.GetSources()["model"]) == vocab.SourceDeclared {
			return classify(l)
		}
	}
	var leaves []*plumblinev1.Layer
	for _, l := range layers {
		switch {
		case vocab.LayerKind(l.GetKind()) == vocab.LayerDisk:
			leaves = append(leaves, l)
		case vocab.LayerKind(l.GetKind()) == vocab.LayerRAID && len(l.GetBelow()) == 0 && vocab.Source(l.GetSource()) == vocab.SourceDeclared:
			leaves = append(leaves, l)
		}
	}
	if len(leaves) == 0 && len(layers) > 0 {
		// No disk layer: judge the bottom of the stack.
		leaves = layers[len(layers)-1:]
	}
	if len(leaves) == 0 {
		return UnknownMedia
	}
	worst := NVMe
	for _, l := range leaves {
		m := classify(l)
		if m == UnknownMedia {
			return UnknownMedia
		}
		if m.rank() < worst.rank() {
			worst = m
		}
	}
	return worst
}

// Model families: substrings of upper-cased model strings.
var (
	networkModels = []string{"ELASTIC BLOCK STORE", "PERSISTENTDISK", "VIRTUAL DISK", "MSFT VIRTUAL", "QEMU", "VBOX"}
	sasSSDModels  = []string{"SAS SSD", "PX0", "PM1643", "PM1653", "MZILT", "MZILS", "HUSMM", "HUSMR", "KPM5", "KPM6", "S842", "XS1600", "XS3200"}
	hdd15KModels  = []string{"15K", "ST300MP", "ST600MP", "ST900MP", "HUS156", "HUC156", "AL13SX", "AL14SX", "AL15SX", "MBA3", "MBE2"}
	hdd10KModels  = []string{"10K", "ST300MM", "ST600MM", "ST900MM", "ST1200MM", "ST1800MM", "ST2400MM", "HUC101", "HUC109", "AL13SE", "AL14SE", "AL15SE", "MBF2"}
)

func has(model string, list []string) bool {
	for _, s := range list {
		if strings.Contains(model, s) {
			return true
		}
	}
	return false
}

func classify(l *plumblinev1.Layer) Media {
	model := strings.ToUpper(l.GetModel())
	dev := l.GetDevice()
	if has(model, networkModels) || strings.HasPrefix(dev, "loop") || strings.HasPrefix(dev, "zram") || strings.HasPrefix(dev, "ram") {
		// Cloud block storage shows up as NVMe or SCSI but is a network disk.
		return UnknownMedia
	}
	if strings.HasPrefix(dev, "nvme") || strings.Contains(model, "NVME") {
		return NVMe
	}
	switch {
	case l.Rotational != nil && !l.GetRotational():
		if has(model, sasSSDModels) {
			return SASSSD
		}
		return SATASSD
	case l.Rotational != nil && l.GetRotational():
		switch {
		case has(model, hdd15KModels):
			return HDD15K
		case has(model, hdd10KModels):
			return HDD10K
		}
		return HDD7200
	}
	// Rotational unknown: only a model that names its class decides.
	switch {
	case has(model, sasSSDModels):
		return SASSSD
	case has(model, hdd15KModels):
		return HDD15K
	case has(model, hdd10KModels):
		return HDD10K
	case model != "" && strings.Contains(model, "SSD"):
		return SATASSD
	}
	return UnknownMedia
}
