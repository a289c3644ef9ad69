package ingest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The bounds of one member-io record (Record.member_io), beyond
// checkGeneric's lengths.
const (
	// maxMemberGroups bounds the groups of one interval, maxGroupMembers
	// the members of one group and maxMembersPerRecord all of them.
	maxMemberGroups     = 256
	maxGroupMembers     = 256
	maxMembersPerRecord = 1024
	// maxByID bounds a member's /dev/disk/by-id names.
	maxByID = 32
	// maxDeviceName bounds a kernel device name and a by-id link name
	// (NAME_MAX).
	maxDeviceName = 255
	// maxMemberInterval bounds the time between an interval's samples.
	maxMemberInterval = 24 * time.Hour
	// What one device can do in one second, far above any device's:
	// completed operations, sectors moved, and milliseconds of summed
	// request time (65536 requests in flight all the second). A delta
	// above them is a counter that went backwards (or was made up), not I/O.
	maxOpsPerSecond     = 1e8
	maxSectorsPerSecond = 1 << 27 // 64 GiB/s
	maxInFlight         = 1 << 16
)

// convertMemberIO checks one interval of member I/O and converts it for
// the store. The error is the record's rejection reason; nothing else of
// the batch is affected.
func convertMemberIO(m *plumblinev1.MemberIO, now time.Time, lim Limits) (*store.MemberIO, error) {
	started, err := checkTime(m.GetStartedAt(), "started_at", now, lim)
	if err != nil {
		return nil, err
	}
	if m.GetInterval() == nil {
		return nil, errors.New("interval missing")
	}
	if err := m.GetInterval().CheckValid(); err != nil {
		return nil, fmt.Errorf("interval: %w", err)
	}
	iv := m.GetInterval().AsDuration()
	if iv <= 0 || iv > maxMemberInterval {
		return nil, fmt.Errorf("interval %s: want above 0 and at most %s", iv, maxMemberInterval)
	}
	if end := started.Add(iv); end.After(now.Add(lim.MaxClockSkew)) {
		return nil, fmt.Errorf("interval ends %s: more than %s ahead of the server's clock", end.Format(time.RFC3339), lim.MaxClockSkew)
	}
	groups := m.GetGroups()
	if len(groups) > maxMemberGroups {
		return nil, fmt.Errorf("%d groups: want at most %d", len(groups), maxMemberGroups)
	}
	out := &store.MemberIO{StartedAt: started, Interval: iv, Groups: make([]store.MemberGroup, 0, len(groups))}
	seen := make(map[string]bool, len(groups))
	total := 0
	for i, g := range groups {
		if err := checkDeviceName(g.GetDevice()); err != nil {
			return nil, fmt.Errorf("groups[%d]: device: %w", i, err)
		}
		if seen[g.GetDevice()] {
			return nil, fmt.Errorf("groups[%d]: device %q twice: want each group once", i, g.GetDevice())
		}
		seen[g.GetDevice()] = true
		if total += len(g.GetMembers()); total > maxMembersPerRecord {
			return nil, fmt.Errorf("more than %d members in one interval", maxMembersPerRecord)
		}
		sg, err := convertMemberGroup(g, iv)
		if err != nil {
			return nil, fmt.Errorf("groups[%d] (%s): %w", i, g.GetDevice(), err)
		}
		out.Groups = append(out.Groups, sg)
	}
	return out, nil
}

func convertMemberGroup(g *plumblinev1.MemberGroup, iv time.Duration) (store.MemberGroup, error) {
	kind := vocab.MemberGroupKind(g.GetKind())
	if !slices.Contains(vocab.MemberGroupKinds(), kind) {
		return store.MemberGroup{}, fmt.Errorf("kind %q: want one of %v", truncateUTF8(g.GetKind(), 64), vocab.MemberGroupKindNames())
	}
	sg := store.MemberGroup{Device: g.GetDevice(), Kind: string(kind)}
	for j, mp := range g.GetMountPoints() {
		if mp == "" || slices.Contains(sg.MountPoints, mp) || hasControl(mp) {
			return sg, fmt.Errorf("mount_points[%d] %q: want a unique path without control characters", j, truncateUTF8(mp, 64))
		}
		sg.MountPoints = append(sg.MountPoints, mp)
	}
	ms := g.GetMembers()
	if len(ms) < 2 || len(ms) > maxGroupMembers {
		return sg, fmt.Errorf("%d members: want 2 to %d (a member has siblings or is not judged)", len(ms), maxGroupMembers)
	}
	for j, c := range ms {
		sc, err := convertMemberCounters(c, kind, iv)
		if err != nil {
			return sg, fmt.Errorf("members[%d] (%s): %w", j, truncateUTF8(c.GetDevice(), 64), err)
		}
		if sc.Device == sg.Device {
			return sg, fmt.Errorf("members[%d]: the group's own device", j)
		}
		for _, o := range sg.Members {
			if o.Device == sc.Device {
				return sg, fmt.Errorf("members[%d]: device %q twice", j, sc.Device)
			}
		}
		sg.Members = append(sg.Members, sc)
	}
	return sg, nil
}

func convertMemberCounters(c *plumblinev1.MemberCounters, kind vocab.MemberGroupKind, iv time.Duration) (store.MemberCounters, error) {
	if err := checkDeviceName(c.GetDevice()); err != nil {
		return store.MemberCounters{}, fmt.Errorf("device: %w", err)
	}
	sc := store.MemberCounters{Device: c.GetDevice(), Serial: c.GetSerial(),
		Reads: c.GetReads(), ReadTimeMS: c.GetReadTimeMs(), Writes: c.GetWrites(), WriteTimeMS: c.GetWriteTimeMs(),
		ReadSectors: c.GetReadSectors(), WriteSectors: c.GetWriteSectors(), IOTimeMS: c.GetIoTimeMs()}
	if len(c.GetById()) > maxByID {
		return sc, fmt.Errorf("%d by_id names: want at most %d", len(c.GetById()), maxByID)
	}
	for k, id := range c.GetById() {
		if err := checkDeviceName(id); err != nil || slices.Contains(sc.ByID, id) {
			return sc, fmt.Errorf("by_id[%d] %q: want a unique link name (%v)", k, truncateUTF8(id, 64), err)
		}
		sc.ByID = append(sc.ByID, id)
	}
	if len(sc.Serial) > maxDeviceName || hasControl(sc.Serial) {
		return sc, fmt.Errorf("serial %q: want at most %d bytes without control characters", truncateUTF8(sc.Serial, 64), maxDeviceName)
	}
	if len(c.GetState()) > 0 && kind != vocab.MemberGroupMD {
		return sc, fmt.Errorf("md state on a member of a %q group: only md members have one", kind)
	}
	if n := len(c.GetState()); n > vocab.MaxMDMemberFlags {
		return sc, fmt.Errorf("%d state flags: want at most %d", n, vocab.MaxMDMemberFlags)
	}
	for _, w := range c.GetState() {
		if err := vocab.CheckMDWord(w); err != nil {
			return sc, fmt.Errorf("state: %w", err)
		}
		if slices.Contains(sc.State, w) {
			return sc, fmt.Errorf("state: %q twice", w)
		}
		sc.State = append(sc.State, w)
	}
	return sc, checkMemberSums(sc, iv)
}

// checkMemberSums checks that a member's deltas are I/O one device could
// have done in the interval: the busy time within the interval, and
// operations, sectors and request time below what any device does (a
// counter that went backwards, sent as a huge delta, fails here).
func checkMemberSums(c store.MemberCounters, iv time.Duration) error {
	sec := iv.Seconds()
	ms := float64(iv.Milliseconds())
	// io_ticks advance in jiffies and the two samples are not taken at the
	// interval's exact ends: a second or 5% of slack.
	if busy := float64(c.IOTimeMS); busy > max(ms*1.05, ms+1000) {
		return fmt.Errorf("io_time_ms %d in an interval of %s: a device is busy at most the whole interval", c.IOTimeMS, iv)
	}
	for _, f := range [...]struct {
		name  string
		v     uint64
		bound float64
	}{
		{"reads", c.Reads, maxOpsPerSecond * (sec + 1)},
		{"writes", c.Writes, maxOpsPerSecond * (sec + 1)},
		{"read_sectors", c.ReadSectors, maxSectorsPerSecond * (sec + 1)},
		{"write_sectors", c.WriteSectors, maxSectorsPerSecond * (sec + 1)},
		{"read_time_ms", c.ReadTimeMS, maxInFlight * (ms + 1000)},
		{"write_time_ms", c.WriteTimeMS, maxInFlight * (ms + 1000)},
	} {
		if float64(f.v) > f.bound || f.v > math.MaxInt64 {
			return fmt.Errorf("%s %d in an interval of %s: above what a device does (a counter that went backwards?)", f.name, f.v, iv)
		}
	}
	return nil
}

// checkDeviceName checks a kernel device name or a /dev/disk/by-id link
// name: 1 to 255 bytes, no '/', no space or control character.
func checkDeviceName(s string) error {
	if s == "" || len(s) > maxDeviceName {
		return fmt.Errorf("%q: want 1 to %d bytes", truncateUTF8(s, 64), maxDeviceName)
	}
	for _, r := range s {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%q: want a name without '/', spaces or control characters", truncateUTF8(s, 64))
		}
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}
