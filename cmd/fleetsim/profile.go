package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	// legacyOffset is the 63-sector partition start of pre-2008 tools
	// (31.5 KiB): the classic misalignment.
	legacyOffset = 63 * 512
)

// Media is what backs a simulated volume; it decides the latencies.
type Media string

const (
	HDD  Media = "hdd"
	SSD  Media = "ssd"
	NVMe Media = "nvme"
)

var (
	mediaKinds  = []Media{HDD, SSD, NVMe}
	offsets     = []uint64{legacyOffset, 64 * kib, mib}
	raidLevels  = []string{"raid1", "raid5", "raid10"}
	stripeUnits = []uint64{64 * kib, 128 * kib, 256 * kib}
	fsKinds     = []string{"ext4", "xfs", "ntfs"}
	models      = map[Media]string{HDD: "ST4000NM0035", SSD: "Samsung SSD 860 PRO", NVMe: "SAMSUNG MZQL23T8HCLS"}
	linuxMounts = []string{"/var/lib/postgresql", "/var/lib/mysql", "/srv/pgwal", "/data"}
	winMounts   = []string{`D:\`, `E:\`, `L:\`, `T:\`}
)

// VolumeProfile is one simulated volume's geometry choices.
type VolumeProfile struct {
	MountPoint string
	Media      Media
	Offset     uint64 // partition start in bytes
	RAIDLevel  string
	StripeUnit uint64
	Disks      uint32
	FSType     string
	Cluster    uint32 // file-system block or NTFS cluster
	Device     string // kernel name of the RAID volume (sdb, nvme0n1, PhysicalDrive1)
	// HiddenStripe: a hardware RAID volume whose stripe unit nobody
	// declared and the controller does not hint. Discovery sees one disk
	// (the controller's logical drive); only the geometry probe
	// (stripe-scan) can tell its unit, and the agent runs it (ScanRecord).
	// RAIDLevel, StripeUnit and Disks are still the array's truth.
	HiddenStripe bool
}

// HostProfile is one simulated agent's host: its identity and volumes.
type HostProfile struct {
	Hostname string
	OS       string
	Volumes  []VolumeProfile
}

// NewHostProfile draws host i's profile from seed: one to three volumes,
// each with its own media, partition offset, declared RAID level and
// stripe unit and file system. A host is Windows (NTFS) or Linux
// (ext4/xfs) as a whole. The draw is deterministic in (seed, i).
func NewHostProfile(seed uint64, i int, hostname string) HostProfile {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	h := HostProfile{Hostname: hostname, OS: "linux"}
	windows := r.IntN(4) == 0
	if windows {
		h.OS = "windows"
	}
	n := 1 + r.IntN(3)
	for v := range n {
		p := VolumeProfile{
			Media:      mediaKinds[r.IntN(len(mediaKinds))],
			Offset:     offsets[r.IntN(len(offsets))],
			RAIDLevel:  raidLevels[r.IntN(len(raidLevels))],
			StripeUnit: stripeUnits[r.IntN(len(stripeUnits))],
		}
		switch p.RAIDLevel {
		case "raid1":
			p.Disks = 2
		case "raid5":
			p.Disks = uint32(3 + r.IntN(6))
		default:
			p.Disks = uint32(4 + 2*r.IntN(3))
		}
		if windows {
			p.FSType, p.Cluster, p.MountPoint = "ntfs", []uint32{4 * kib, 64 * kib}[r.IntN(2)], winMounts[v]
			p.Device = fmt.Sprintf("PhysicalDrive%d", v+1)
		} else {
			p.FSType, p.Cluster, p.MountPoint = fsKinds[r.IntN(2)], 4*kib, linuxMounts[v]
			p.Device = fmt.Sprintf("sd%c", 'b'+v)
			if p.Media == NVMe {
				p.Device = fmt.Sprintf("nvme%dn1", v)
			}
		}
		h.Volumes = append(h.Volumes, p)
	}
	// A stream of its own, so that the draws above are what they were
	// before hidden stripes: one volume in four.
	hide := rand.New(rand.NewPCG(seed^hiddenStream, uint64(i)))
	for v := range h.Volumes {
		h.Volumes[v].HiddenStripe = hide.IntN(4) == 0
	}
	return h
}

// hiddenStream seeds the draw of hidden stripes.
const hiddenStream = 0x41dde7

// controllerModel is the model a hardware RAID controller's logical drive
// reports.
const controllerModel = "PERC H740P Mini"

func dataDisks(level string, disks uint32) uint32 {
	switch level {
	case "raid1":
		return 1
	case "raid5":
		return disks - 1
	case "raid10":
		return disks / 2
	}
	return disks
}

func u64(v uint64) *uint64 { return &v }

// partitionName is the kernel name of the first partition of dev.
func partitionName(dev string) string {
	if dev[len(dev)-1] >= '0' && dev[len(dev)-1] <= '9' {
		return dev + "p1"
	}
	return dev + "1"
}

// Volume is the profile as `agent inspect` reports it: the file system
// layer, the partition at its offset and the declared hardware RAID
// volume (with its media: rotational and model), top to bottom, with the
// agent's own alignment verdict.
func (p VolumeProfile) Volume(os string) *plumblinev1.Volume {
	part := partitionName(p.Device)
	mounted := "/dev/" + part
	if os == "windows" {
		mounted = `\\?\Volume{` + fmt.Sprintf("%08x-0000-0000-0000-%012x", p.Offset, p.StripeUnit) + `}\`
	}
	size := uint64(dataDisks(p.RAIDLevel, p.Disks)) * 1 << 40
	fsLayer := &plumblinev1.Layer{Kind: string(vocab.LayerFilesystem), Device: mounted, FsType: p.FSType, BlockSizeBytes: p.Cluster,
		OffsetBytes: u64(0), SizeBytes: size - p.Offset, Source: string(vocab.SourceSuperblock)}
	fs := &plumblinev1.Filesystem{Type: p.FSType, BlockSizeBytes: p.Cluster, SizeBytes: size - p.Offset}
	if p.FSType == "xfs" && !p.HiddenStripe {
		// mkfs.xfs on a declared array: sunit = stripe unit, swidth = full stripe.
		fsLayer.StripeUnitBytes, fsLayer.StripeWidthBytes = p.StripeUnit, p.StripeUnit*uint64(dataDisks(p.RAIDLevel, p.Disks))
		fs.StripeUnitBytes, fs.StripeWidthBytes = fsLayer.StripeUnitBytes, fsLayer.StripeWidthBytes
	}
	rot := p.Media == HDD
	physical := uint32(512)
	if p.Media != HDD {
		physical = 4096
	}
	bottom := &plumblinev1.Layer{Kind: string(vocab.LayerRAID), Device: p.Device, RaidLevel: p.RAIDLevel, StripeUnitBytes: p.StripeUnit,
		RaidDisks: p.Disks, RaidDataDisks: dataDisks(p.RAIDLevel, p.Disks), OffsetBytes: u64(0), SizeBytes: size,
		LogicalSectorBytes: 512, PhysicalSectorBytes: physical, Rotational: &rot, Model: models[p.Media],
		Source: string(vocab.SourceDeclared)}
	if p.HiddenStripe {
		bottom = &plumblinev1.Layer{Kind: string(vocab.LayerDisk), Device: p.Device, OffsetBytes: u64(0), SizeBytes: size,
			LogicalSectorBytes: 512, PhysicalSectorBytes: physical, Rotational: &rot, Model: controllerModel, Source: string(vocab.SourceSysfs)}
	}
	v := &plumblinev1.Volume{
		MountPoint: p.MountPoint,
		Device:     mounted,
		Filesystem: fs,
		Layers: []*plumblinev1.Layer{
			fsLayer,
			{Kind: string(vocab.LayerPartition), Device: part, OffsetBytes: u64(p.Offset), SizeBytes: size - p.Offset,
				LogicalSectorBytes: 512, PartitionTable: "gpt", PartitionNumber: 1, Source: string(vocab.SourceSysfs)},
			bottom,
		},
	}
	v.Alignment = align.Evaluate(v)
	return v
}

// Misaligned reports whether the volume is misaligned on its array, stripe
// hidden or not: what its latencies show (SampleHistogram), whatever the
// agent's verdict knows.
func (p VolumeProfile) Misaligned(os string) bool {
	p.HiddenStripe = false
	return p.Volume(os).GetAlignment().GetVerdict() == "misaligned"
}

// Inventory is the host's full inventory, as a geometry snapshot carries it.
func (h HostProfile) Inventory(kernel, version string, at time.Time) *plumblinev1.Inventory {
	inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{
		Hostname: h.Hostname, Os: h.OS, Kernel: kernel, AgentVersion: version, CollectedAt: timestamppb.New(at),
	}}
	for _, v := range h.Volumes {
		inv.Volumes = append(inv.Volumes, v.Volume(h.OS))
	}
	return inv
}

// Host is the Hello's host facts.
func (h HostProfile) Host(kernel, version string) *plumblinev1.Host {
	return &plumblinev1.Host{Hostname: h.Hostname, Os: h.OS, Kernel: kernel, AgentVersion: version}
}

// kernelFor is a plausible kernel string for the host's OS.
func kernelFor(os string) string {
	if os == "windows" {
		return "10.0.20348"
	}
	return "6.1.0-28-amd64"
}

// latencyModel is the median and log-normal spread of one probe kind on
// one medium, aligned; misalignment multiplies the median.
type latencyModel struct {
	median time.Duration
	sigma  float64
}

// latencies are plausible medians for 8 KiB random I/O at queue depth 1 and
// 4 KiB log writes behind a RAID controller (write-back cache on HDD
// arrays, which is why HDD writes beat HDD reads).
var latencies = map[Media]map[probe.Kind]latencyModel{
	HDD:  {probe.RandomRead: {8 * time.Millisecond, 0.45}, probe.RandomWrite: {900 * time.Microsecond, 0.6}, probe.LogWrite: {350 * time.Microsecond, 0.5}},
	SSD:  {probe.RandomRead: {160 * time.Microsecond, 0.3}, probe.RandomWrite: {70 * time.Microsecond, 0.4}, probe.LogWrite: {90 * time.Microsecond, 0.35}},
	NVMe: {probe.RandomRead: {85 * time.Microsecond, 0.25}, probe.RandomWrite: {25 * time.Microsecond, 0.35}, probe.LogWrite: {30 * time.Microsecond, 0.3}},
}

// misalignedPenalty is how much slower a misaligned volume's median is:
// split I/Os touch two stripe units (reads) or force read-modify-write
// (parity RAID writes).
func misalignedPenalty(kind probe.Kind, raid string) float64 {
	switch {
	case !kind.Spec().Writes:
		return 1.25
	case raid == "raid5":
		return 2.0
	default:
		return 1.4
	}
}

// probeShape is the I/O shape of each kind, as the agent's defaults run it.
var probeShape = map[probe.Kind]struct {
	bs, qd uint32
	sync   string
}{
	probe.RandomRead:  {8 * kib, 1, ""},
	probe.RandomWrite: {8 * kib, 1, ""},
	probe.LogWrite:    {4 * kib, 1, string(probe.SyncDsync)},
}

// ProbeOps is the op budget of every simulated run (the dev config's).
const ProbeOps = 200

// SampleHistogram fills a real internal/histogram with ops log-normal
// latencies of the kind on the medium (a 1% tail at 6x the median), and
// returns it with the run's duration at queue depth 1 and iops cap.
func SampleHistogram(r *rand.Rand, m Media, kind probe.Kind, misaligned bool, raid string, ops int, iopsCap float64) (*histogram.Histogram, time.Duration) {
	lm := latencies[m][kind]
	med := float64(lm.median)
	if misaligned {
		med *= misalignedPenalty(kind, raid)
	}
	var h histogram.Histogram
	var busy time.Duration
	for range ops {
		d := med * math.Exp(lm.sigma*r.NormFloat64())
		if r.IntN(100) == 0 {
			d *= 6
		}
		dd := time.Duration(d)
		h.Observe(dd)
		busy += dd
	}
	if iopsCap > 0 {
		busy = max(busy, time.Duration(float64(ops)/iopsCap*float64(time.Second)))
	}
	return &h, busy
}

// variantsPerClass is how many different histograms are pre-drawn for each
// (medium, kind, misaligned, raid) class; records pick one at random so
// that sending needs no sampling.
const variantsPerClass = 8

type classKey struct {
	media      Media
	kind       probe.Kind
	misaligned bool
	raid       string
}

type sample struct {
	hist     *plumblinev1.Histogram // shared, read only
	duration time.Duration
}

// SamplePool holds pre-drawn histograms per class. It is read only after
// NewSamplePool and safe for concurrent use.
type SamplePool struct {
	m     map[classKey][]sample
	scans map[scanKey][]scanSample // stripe-scans (ScanRecord)
}

const simIOPSCap = 50

// NewSamplePool draws variantsPerClass histograms for every class.
func NewSamplePool(seed uint64) *SamplePool {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	p := &SamplePool{m: map[classKey][]sample{}, scans: drawScans(seed)}
	for _, m := range mediaKinds {
		for _, k := range probe.JudgedKinds() {
			for _, mis := range []bool{false, true} {
				for _, raid := range raidLevels {
					key := classKey{m, k, mis, raid}
					for range variantsPerClass {
						h, d := SampleHistogram(r, m, k, mis, raid, ProbeOps, simIOPSCap)
						p.m[key] = append(p.m[key], sample{hist: wire.HistogramToProto(h), duration: d})
					}
				}
			}
		}
	}
	return p
}

// ProbeRecord is a probe result of the given kind on volume v of a host,
// finished at now, as the agent would spool it (sequence and produced_at
// are the caller's).
func (p *SamplePool) ProbeRecord(r *rand.Rand, v *VolumeProfile, misaligned bool, kind probe.Kind, now time.Time) *plumblinev1.ProbeResult {
	vs := p.m[classKey{v.Media, kind, misaligned, v.RAIDLevel}]
	s := vs[r.IntN(len(vs))]
	shape := probeShape[kind]
	res := simulatedRun(r, v, ProbeOps, s.duration, s.hist, now)
	res.Kind = string(kind)
	res.BlockSizeBytes, res.QueueDepth, res.Sync = shape.bs, shape.qd, shape.sync
	res.Bytes = ProbeOps * uint64(shape.bs)
	res.IopsCap = simIOPSCap
	return res
}

// simulatedRun is what every simulated run on volume v reports, whatever
// its kind: all of its ops budget done in d, ending at now, with latency
// h, through the probe file, past a busy guard that found the device a
// little busy (the last random draw of a record). The caller sets the
// kind and what follows from it.
func simulatedRun(r *rand.Rand, v *VolumeProfile, ops uint64, d time.Duration, h *plumblinev1.Histogram, now time.Time) *plumblinev1.ProbeResult {
	return &plumblinev1.ProbeResult{
		MountPoint:         v.MountPoint,
		Device:             v.Device,
		Ops:                ops,
		Duration:           durationpb.New(d),
		StartedAt:          timestamppb.New(now.Add(-d)),
		CacheBypass:        true,
		Latency:            h,
		ProbeFile:          probeFile(v),
		ProbeFileSizeBytes: 64 * mib,
		OpsBudget:          ops,
		BusyGuard:          "on",
		BusyPercent:        float64(r.IntN(300)) / 10,
	}
}

// probeFile is the volume's probe file.
func probeFile(v *VolumeProfile) string {
	if v.MountPoint[0] != '/' {
		return v.MountPoint + `.plumbline\` + probe.DefaultFileName
	}
	return v.MountPoint + "/.plumbline/" + probe.DefaultFileName
}

// maintenanceSkip makes pr a run a maintenance window held back, as the
// agent reports one: skipped, no operations, stop reason maintenance.
func maintenanceSkip(pr *plumblinev1.ProbeResult) {
	pr.Ops, pr.Bytes, pr.Duration, pr.Skipped, pr.StoppedReason = 0, 0, durationpb.New(0), true, vocab.StopMaintenance
	pr.Latency = wire.HistogramToProto(&histogram.Histogram{})
	pr.StripeScan = nil // a run that never started answers nothing
}
