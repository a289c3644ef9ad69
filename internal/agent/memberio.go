package agent

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Member I/O (Record.member_io): every intervals.member_io the agent reads
// /proc/diskstats once and sends, for each group of sibling devices under
// its volumes (geometry.MemberGroups: md members, mirror legs, the PVs of
// a striped LV, multipath paths), each member's counter deltas since the
// previous read. The server judges each member against its siblings; the
// agent only counts. A member is left out of an interval when it has no
// previous sample (a new group, a device that came back), when its device
// number changed (another device took the name) or when a counter went
// backwards (the device was reset or replaced); a group left with fewer
// than two members, or whose members neither completed an operation nor
// were busy (a stall completes nothing but is busy), is not sent.

// memberSet is what the last geometry discovery found to sample: the
// groups and their members' identities.
type memberSet struct {
	groups []geometry.MemberGroup
	ids    map[string]geometry.MemberIdentity
	states *geometry.MDStates // md members' state, read at every sample; nil: the discovered state
}

// newMemberSet finds the member groups under vols and reads their
// members' identities under the roots of o.
func newMemberSet(vols []*plumblinev1.Volume, o geometry.Options) (*memberSet, geometry.MemberGroupsResult) {
	res := geometry.MemberGroups(vols)
	var devs []string
	for _, g := range res.Groups {
		for _, m := range g.Members {
			devs = append(devs, m.Device)
		}
	}
	return &memberSet{groups: res.Groups, ids: geometry.MemberIdentities(o, devs), states: geometry.NewMDStates(o, res.Groups)}, res
}

// devSample is one device's line of /proc/diskstats.
type devSample struct {
	major, minor uint32
	io           blockdevice.IOStats
}

// Why a member was left out of an interval (the agent's
// plumbline_agent_member_io_dropped_total reasons).
const (
	memberDropNew       = "no-previous-sample" // first sample of it, or it left diskstats
	memberDropReplaced  = "device-replaced"    // another device number under the name
	memberDropBackwards = "counter-backwards"  // a counter went back
)

// memberSampler turns successive /proc/diskstats reads into intervals.
type memberSampler struct {
	read func() ([]blockdevice.Diskstats, error)
	prev map[string]devSample // the devices of the last set, by kernel name
	at   time.Time            // when prev was read; zero before the first read
}

// newMemberSampler reads <procRoot>/diskstats (sysRoot as procfs'
// blockdevice wants one).
func newMemberSampler(procRoot, sysRoot string) (*memberSampler, error) {
	fs, err := blockdevice.NewFS(procRoot, sysRoot)
	if err != nil {
		return nil, fmt.Errorf("member I/O: %w", err)
	}
	return &memberSampler{read: fs.ProcDiskstats}, nil
}

// memberSample is one interval's answer: the record (nil when there is
// nothing to send) and the members left out, by reason.
type memberSample struct {
	io      *plumblinev1.MemberIO
	dropped map[string]int
}

// sample reads diskstats at now and returns the interval since the
// previous read for the groups of set. The first read only sets the
// baseline.
func (s *memberSampler) sample(now time.Time, set *memberSet) (memberSample, error) {
	stats, err := s.read()
	if err != nil {
		return memberSample{}, fmt.Errorf("member I/O: read diskstats: %w", err)
	}
	cur := make(map[string]devSample, len(s.prev))
	want := map[string]bool{}
	for _, g := range set.groups {
		for _, m := range g.Members {
			want[m.Device] = true
		}
	}
	for _, d := range stats {
		// diskstats writes a name with a '/' (cciss/c0d0) as the kernel
		// does; sysfs, and so the layers, write it with a '!'.
		name := strings.ReplaceAll(d.DeviceName, "/", "!")
		if want[name] {
			cur[name] = devSample{major: d.MajorNumber, minor: d.MinorNumber, io: d.IOStats}
		}
	}
	prev, prevAt := s.prev, s.at
	s.prev, s.at = cur, now
	out := memberSample{dropped: map[string]int{}}
	if prevAt.IsZero() || !now.After(prevAt) {
		return out, nil
	}
	elapsed := now.Sub(prevAt)
	mio := &plumblinev1.MemberIO{StartedAt: timestamppb.New(prevAt), Interval: durationpb.New(elapsed)}
	for _, g := range set.groups {
		pg := &plumblinev1.MemberGroup{Device: g.Device, Kind: string(g.Kind), MountPoints: slices.Clone(g.MountPoints)}
		busy := false
		for _, m := range g.Members {
			c, why := memberDelta(prev, cur, m.Device, elapsed)
			if why != "" {
				out.dropped[why]++
				continue
			}
			id := set.ids[m.Device]
			c.ById = slices.Clone(id.ByID)
			c.Serial = geometry.WireSerial(m.Serial)
			if c.Serial == "" {
				c.Serial = id.Serial
			}
			c.State = slices.Clone(m.State)
			if st, ok := set.states.State(g.Device, m.Device); ok {
				c.State = st
			}
			busy = busy || c.Reads > 0 || c.Writes > 0 || c.IoTimeMs > 0
			pg.Members = append(pg.Members, c)
		}
		if len(pg.Members) >= 2 && busy {
			mio.Groups = append(mio.Groups, pg)
		}
	}
	if len(mio.Groups) > 0 {
		out.io = mio
	}
	return out, nil
}

// memberDelta is dev's counters between the two reads, or why it has
// none.
func memberDelta(prev, cur map[string]devSample, dev string, elapsed time.Duration) (*plumblinev1.MemberCounters, string) {
	p, okp := prev[dev]
	c, okc := cur[dev]
	switch {
	case !okp || !okc:
		return nil, memberDropNew
	case p.major != c.major || p.minor != c.minor:
		return nil, memberDropReplaced
	}
	out := &plumblinev1.MemberCounters{Device: dev}
	ok := true
	count := func(dst *uint64, a, b uint64) {
		if b < a {
			ok = false
			return
		}
		*dst = b - a
	}
	ticks := func(dst *uint64, a, b uint64, limit uint64) {
		d, fine := ticksDelta(a, b)
		if !fine || d > limit {
			ok = false
			return
		}
		*dst = d
	}
	count(&out.Reads, p.io.ReadIOs, c.io.ReadIOs)
	count(&out.Writes, p.io.WriteIOs, c.io.WriteIOs)
	count(&out.ReadSectors, p.io.ReadSectors, c.io.ReadSectors)
	count(&out.WriteSectors, p.io.WriteSectors, c.io.WriteSectors)
	ticks(&out.ReadTimeMs, p.io.ReadTicks, c.io.ReadTicks, math.MaxUint32)
	ticks(&out.WriteTimeMs, p.io.WriteTicks, c.io.WriteTicks, math.MaxUint32)
	// The device cannot be busy for longer than the interval (a second
	// of slack for the kernel's accounting granularity).
	ticks(&out.IoTimeMs, p.io.IOsTotalTicks, c.io.IOsTotalTicks, uint64(elapsed.Milliseconds())+1000)
	if !ok {
		return nil, memberDropBackwards
	}
	return out, ""
}

// ticksDelta is the difference of two millisecond fields of
// /proc/diskstats, which the kernel prints as 32-bit numbers (block/genhd.c
// part_stat_show: "%8u"): a busy member's summed read time wraps every
// 2^32 ms of I/O time (some days at queue depth 10). A field that went
// from the upper half of the 32-bit range to below where it was is taken
// as wrapped once; any other decrease is a reset (ok false).
func ticksDelta(a, b uint64) (d uint64, ok bool) {
	if b >= a {
		return b - a, true
	}
	const wrap = 1 << 32
	if a < wrap && a >= wrap/2 && b < wrap/2 {
		return b + wrap - a, true
	}
	return 0, false
}
