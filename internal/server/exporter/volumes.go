package exporter

import (
	"strconv"

	"github.com/plumbline/plumbline/internal/server/store"
)

// The volume geometry series: identity and geometry, the predicted split
// by I/O size, findings and md members missing — one part per volume,
// rebuilt when its judged record changes — and the fleet counts. They are
// the judged record's columns (store.ListJudgedVolumes) as they are: the
// exporter neither decodes a volume's geometry nor judges it.

// volPart is a volume's identity, geometry and findings, rebuilt when its
// judged record changes.
type volPart struct {
	part
	gen uint64
	vol store.JudgedVolume
}

// buildVolumes: identity, geometry, verdict, findings of the volumes
// whose judged record changed; the fleet counts. Parts of volumes gone
// are dropped.
func (c *Collector) buildVolumes() {
	type fleetKey struct{ verdict, profile string }
	fleet := map[fleetKey]int{}
	c.present = make(map[volKey]presentVol, len(c.vols))
	for i := range c.vols { // every agent's volumes: agent_id keys the series, host is a label
		v := &c.vols[i]
		k := volKey{v.AgentID, v.MountPoint}
		p := c.volParts[k]
		if p == nil {
			p = &volPart{part: part{hash: k.hash()}}
			c.volParts[k] = p
		}
		c.present[k] = presentVol{host: v.Hostname, hash: p.hash}
		if p.gen == 0 || !p.vol.Equal(v) {
			p.vol = *v
			c.rebuild(&p.part, c.volumeSeries(v))
		}
		p.gen = c.gen
		fleet[fleetKey{v.Verdict, v.Profile}]++
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

// volumeSeries are a volume's series, from its judged record: the split
// fractions, allocation unit and measured cost are shown when known (the
// record's -1 is unknown).
func (c *Collector) volumeSeries(v *store.JudgedVolume) []*series {
	agent, host, mount := v.AgentID, v.Hostname, v.MountPoint
	ss := []*series{c.series(famVolInfo, 1, agent, host, mount, v.Device, v.FSType, v.RAIDLevel,
		strconv.FormatInt(max(v.StripeUnitBytes, 0), 10), known(v.DataOffsetBytes, 0), known(v.AllocationUnitBytes, 1),
		v.Media, v.Profile, v.Verdict)}
	for i := range c.ioSizes {
		if s := v.SplitFraction[i]; s >= 0 {
			ss = append(ss, c.series(famVolSplit, s, agent, host, mount, c.ioSizeNames[i]))
		}
	}
	for i := range c.ioSizes {
		if g := v.GranularitySplit[i]; g >= 0 {
			ss = append(ss, c.series(famVolGranSplit, g, agent, host, mount, c.ioSizeNames[i]))
		}
	}
	if v.MeasuredSplitCost >= 0 {
		ss = append(ss, c.series(famVolMeasuredCost, v.MeasuredSplitCost, agent, host, mount))
	}
	if v.StripeUnitConfidence > 0 {
		ss = append(ss, c.series(famVolStripeConfidence, v.StripeUnitConfidence, agent, host, mount, v.StripeUnitSource))
	}
	for _, fd := range v.Findings {
		ss = append(ss, c.series(famVolFinding, 1, agent, host, mount, fd.Rule, fd.Severity))
	}
	for _, r := range v.Arrays {
		ss = append(ss, c.series(famVolRAIDMissing, float64(r.Missing), agent, host, mount, r.Device))
		ss = c.arraySync(ss, v, r)
	}
	return ss
}

// known formats a size of a judged record, or "" (unknown) when it is
// below least.
func known(n, least int64) string {
	if n < least {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
