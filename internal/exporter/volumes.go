package exporter

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/baseline"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The volume geometry series: identity and geometry, the predicted split
// by I/O size, findings and md members missing — one part per volume,
// rebuilt when its row changes — and the fleet counts.

// volPart is a volume's identity, geometry and findings, rebuilt when its
// row changes.
type volPart struct {
	part
	gen   uint64
	vol   store.Volume
	facts volumeFacts
}

// buildVolumes: identity, geometry, verdict, findings of the volumes
// whose row changed; the fleet counts. Parts of volumes gone are dropped.
func (c *Collector) buildVolumes() {
	type fleetKey struct{ verdict, profile string }
	fleet := map[fleetKey]int{}
	c.present = make(map[volKey]presentVol, len(c.vols))
	for _, v := range c.vols { // every agent's volumes: agent_id keys the series, host is a label
		k := volKey{v.AgentID, v.MountPoint}
		p := c.volParts[k]
		if p == nil {
			p = &volPart{part: part{hash: k.hash()}}
			c.volParts[k] = p
		}
		c.present[k] = presentVol{host: v.Hostname, hash: p.hash}
		if p.gen == 0 || !sameVolume(p.vol, v) {
			if p.gen == 0 || p.facts.seq != v.Sequence {
				p.facts = factsOf(v)
			}
			p.vol = v
			c.rebuild(&p.part, c.volumeSeries(v, &p.facts))
		}
		p.gen = c.gen
		fleet[fleetKey{v.Verdict, p.facts.profile}]++
	}
	for k, p := range c.volParts {
		if p.gen != c.gen {
			c.sweep(&p.part)
			delete(c.volParts, k)
		}
	}
	for k, p := range c.baseParts {
		if _, ok := c.present[k]; !ok {
			c.sweep(&p.part)
			delete(c.baseParts, k)
		}
	}
	volumes := make([]*series, 0, len(fleet))
	for k, n := range fleet {
		volumes = append(volumes, c.series(famVolumes, float64(n), k.verdict, k.profile))
	}
	c.set(famVolumes, volumes)
}

// sameVolume: the same row of a present volume as far as the exposition
// goes (a volume's row changes only with its sequence or its judgement).
func sameVolume(a, b store.Volume) bool {
	return a.AgentID == b.AgentID && a.Hostname == b.Hostname && a.MountPoint == b.MountPoint && a.Sequence == b.Sequence &&
		a.JudgedAt.Equal(b.JudgedAt)
}

func (c *Collector) volumeSeries(v store.Volume, f *volumeFacts) []*series {
	agent, host, mount := v.AgentID, v.Hostname, v.MountPoint
	ss := []*series{c.series(famVolInfo, 1, agent, host, mount, v.Device, v.FSType, f.raidLevel,
		strconv.FormatUint(v.StripeUnitBytes, 10), optUint(v.DataOffsetBytes), f.cluster, f.media, f.profile, v.Verdict)}
	for i, size := range c.ioSizes {
		if s, ok := f.split[size]; ok {
			ss = append(ss, c.series(famVolSplit, s, agent, host, mount, c.ioSizeNames[i]))
		}
	}
	for i, size := range c.ioSizes {
		if g, ok := f.granularity[size]; ok {
			ss = append(ss, c.series(famVolGranSplit, g, agent, host, mount, c.ioSizeNames[i]))
		}
	}
	if f.splitCost != nil {
		ss = append(ss, c.series(famVolMeasuredCost, *f.splitCost, agent, host, mount))
	}
	if f.confidence > 0 {
		ss = append(ss, c.series(famVolStripeConfidence, f.confidence, agent, host, mount, f.stripeSource))
	}
	for _, fd := range f.findings {
		ss = append(ss, c.series(famVolFinding, 1, agent, host, mount, fd[0], fd[1]))
	}
	for _, r := range f.raids {
		ss = append(ss, c.series(famVolRAIDMissing, float64(r.missing), agent, host, mount, r.device))
	}
	return ss
}

// volumeFacts is what the exporter derives from a volume's geometry.
type volumeFacts struct {
	seq                                uint64
	raidLevel, cluster, media, profile string
	findings                           [][2]string // rule, severity
	raids                              []raidFacts
	// split is the offset-caused split by I/O size (the server's
	// alignment, as the volumes table's split columns), granularity the
	// split at any offset.
	split, granularity map[uint32]float64
	// splitCost is the measured cost of one split I/O (nil: not
	// measured); confidence the stripe-scan measurement's behind the
	// verdict (0: none), stripeSource where the judged unit comes from.
	splitCost    *float64
	confidence   float64
	stripeSource string
}

type raidFacts struct {
	device  string
	missing int
}

func factsOf(v store.Volume) volumeFacts {
	f := volumeFacts{seq: v.Sequence, raidLevel: vocab.NoRAID, cluster: "", media: string(baseline.UnknownMedia), profile: ""}
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(v.Geometry, &pv); err != nil {
		return f
	}
	p := baseline.ProfileOf(&pv)
	f.raidLevel, f.media, f.profile = p.RAIDLevel, string(p.Media), p.Key()
	if p.AllocationUnit > 0 {
		f.cluster = strconv.FormatUint(uint64(p.AllocationUnit), 10)
	}
	f.split = pv.GetAlignment().GetSplitFraction()
	f.granularity = pv.GetAlignment().GetGranularitySplitFraction()
	if a := pv.GetAlignment(); a != nil && a.MeasuredSplitCostSeconds != nil { // the stored geometry has none: the judged record has it
		cost := a.GetMeasuredSplitCostSeconds()
		f.splitCost = &cost
	}
	f.confidence = pv.GetAlignment().GetStripeUnitConfidence()
	f.stripeSource = pv.GetAlignment().GetStripeUnitSource()
	seen := map[[2]string]bool{}
	for _, fd := range pv.GetAlignment().GetFindings() {
		k := [2]string{fd.GetRule(), fd.GetSeverity()}
		if !seen[k] {
			seen[k] = true
			f.findings = append(f.findings, k)
		}
	}
	for _, l := range pv.GetLayers() {
		// md arrays: the kernel's raid_disks against the member devices
		// sysfs lists below the array. (md's own degraded count and member
		// states are not in the geometry; see docs/runbooks.)
		if l.GetKind() != "raid" || l.GetSources()["raid_disks"] != "sysfs" || l.GetRaidDisks() == 0 {
			continue
		}
		missing := int(l.GetRaidDisks()) - len(l.GetBelow())
		f.raids = append(f.raids, raidFacts{device: l.GetDevice(), missing: max(missing, 0)})
	}
	return f
}
