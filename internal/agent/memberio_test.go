package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs/blockdevice"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// diskLine is one /proc/diskstats line as Linux 5.5+ writes it (20
// fields): reads, merges, sectors, ms; writes, ...; in flight, io ms,
// weighted ms; discards (4); flushes (2).
type diskLine struct {
	major, minor                                   int
	name                                           string
	reads, rsect, rms, writes, wsect, wms, ioTicks uint64
}

func (l diskLine) String() string {
	return fmt.Sprintf("%4d %7d %s %d 0 %d %d %d 0 %d %d 0 %d %d 0 0 0 0 0 0",
		l.major, l.minor, l.name, l.reads, l.rsect, l.rms, l.writes, l.wsect, l.wms, l.ioTicks, l.rms+l.wms)
}

// fakeProc is a procfs root whose diskstats the test rewrites.
type fakeProc struct {
	t         testing.TB
	proc, sys string
}

func newFakeProc(t testing.TB) *fakeProc {
	root := t.TempDir()
	p := &fakeProc{t: t, proc: filepath.Join(root, "proc"), sys: filepath.Join(root, "sys")}
	for _, d := range []string{p.proc, p.sys} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *fakeProc) write(lines ...diskLine) {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String() + "\n")
	}
	if err := os.WriteFile(filepath.Join(p.proc, "diskstats"), []byte(b.String()), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// raid5Set is one md RAID5 of three disks on /pgdata, sdb known by id.
func raid5Set() *memberSet {
	return &memberSet{
		groups: []geometry.MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, MountPoints: []string{"/pgdata"}, Members: []geometry.Member{
			{Device: "sdb", State: []string{"in_sync"}, Serial: "S-B"}, {Device: "sdc", State: []string{"in_sync"}}, {Device: "sdd", State: []string{"in_sync"}}}}},
		ids: map[string]geometry.MemberIdentity{"sdb": {ByID: []string{"wwn-0x5000b"}, Serial: "from-sysfs"}, "sdc": {ByID: []string{"wwn-0x5000c"}, Serial: "S-C"}},
	}
}

// Deltas between two reads, per member, with the interval; the md array
// itself and unrelated devices are not members.
func TestMemberSamplerDeltas(t *testing.T) {
	t.Parallel()
	p := newFakeProc(t)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		t.Fatal(err)
	}
	set := raid5Set()
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	p.write(diskLine{8, 16, "sdb", 100, 800, 50, 200, 1600, 300, 400},
		diskLine{8, 32, "sdc", 100, 800, 50, 200, 1600, 300, 400},
		diskLine{8, 48, "sdd", 7, 56, 3, 9, 72, 5, 8},
		diskLine{9, 0, "md0", 1, 1, 1, 1, 1, 1, 1})
	first, err := s.sample(t0, set)
	if err != nil || first.io != nil {
		t.Fatalf("first sample = %v, %v; want no record (it is the baseline)", first.io, err)
	}
	p.write(diskLine{8, 16, "sdb", 160, 1280, 110, 260, 2080, 420, 9400},
		diskLine{8, 32, "sdc", 160, 1280, 530, 260, 2080, 2700, 41000},
		diskLine{8, 48, "sdd", 67, 536, 63, 69, 552, 125, 9008},
		diskLine{9, 0, "md0", 999, 999, 999, 999, 999, 999, 999})
	got, err := s.sample(t0.Add(time.Minute), set)
	if err != nil {
		t.Fatal(err)
	}
	want := &plumblinev1.MemberIO{StartedAt: tsAt(t0), Interval: dur(time.Minute), Groups: []*plumblinev1.MemberGroup{{
		Device: "md0", Kind: "md", MountPoints: []string{"/pgdata"}, Members: []*plumblinev1.MemberCounters{
			{Device: "sdb", ById: []string{"wwn-0x5000b"}, Serial: "S-B", Reads: 60, ReadTimeMs: 60, Writes: 60, WriteTimeMs: 120, ReadSectors: 480, WriteSectors: 480, IoTimeMs: 9000, State: []string{"in_sync"}},
			{Device: "sdc", ById: []string{"wwn-0x5000c"}, Serial: "S-C", Reads: 60, ReadTimeMs: 480, Writes: 60, WriteTimeMs: 2400, ReadSectors: 480, WriteSectors: 480, IoTimeMs: 40600, State: []string{"in_sync"}},
			{Device: "sdd", Reads: 60, ReadTimeMs: 60, Writes: 60, WriteTimeMs: 120, ReadSectors: 480, WriteSectors: 480, IoTimeMs: 9000, State: []string{"in_sync"}},
		}}}}
	if diff := gocmp.Diff(want, got.io, protocmp.Transform()); diff != "" {
		t.Errorf("member I/O (-want +got):\n%s", diff)
	}
	if len(got.dropped) != 0 {
		t.Errorf("dropped = %v, want none", got.dropped)
	}
}

// A member whose counters went back (reset, replaced under the same
// number), whose device number changed, or that left diskstats is left
// out of the interval and counted; a group left with one member is not
// sent; a member is back in the interval after.
func TestMemberSamplerDrops(t *testing.T) {
	t.Parallel()
	p := newFakeProc(t)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		t.Fatal(err)
	}
	set := raid5Set()
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	p.write(diskLine{8, 16, "sdb", 100, 800, 50, 200, 1600, 300, 400},
		diskLine{8, 32, "sdc", 100, 800, 50, 200, 1600, 300, 400},
		diskLine{8, 48, "sdd", 100, 800, 50, 200, 1600, 300, 400})
	if _, err := s.sample(t0, set); err != nil {
		t.Fatal(err)
	}
	// sdb reset, sdc another device now, sdd gone.
	p.write(diskLine{8, 16, "sdb", 5, 40, 5, 5, 40, 5, 10},
		diskLine{8, 96, "sdc", 200, 1600, 100, 300, 2400, 400, 500})
	got, err := s.sample(t0.Add(time.Minute), set)
	if err != nil {
		t.Fatal(err)
	}
	if got.io != nil {
		t.Errorf("record %v, want none (no group keeps two members)", got.io)
	}
	wantDrop := map[string]int{memberDropBackwards: 1, memberDropReplaced: 1, memberDropNew: 1}
	if diff := gocmp.Diff(wantDrop, got.dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	p.write(diskLine{8, 16, "sdb", 25, 200, 25, 5, 40, 5, 30},
		diskLine{8, 96, "sdc", 220, 1760, 120, 300, 2400, 400, 520},
		diskLine{8, 48, "sdd", 120, 960, 70, 200, 1600, 300, 420})
	got, err = s.sample(t0.Add(2*time.Minute), set)
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, g := range got.io.GetGroups() {
		for _, m := range g.GetMembers() {
			devs = append(devs, m.GetDevice())
		}
	}
	if diff := gocmp.Diff([]string{"sdb", "sdc"}, devs); diff != "" {
		t.Errorf("members in the interval after (-want +got):\n%s", diff)
	}
	if got.dropped[memberDropNew] != 1 {
		t.Errorf("dropped = %v, want sdd (back in diskstats) once without a previous sample", got.dropped)
	}
}

// A device whose kernel name holds a '/' in /proc/diskstats (cciss/c0d0)
// is the member sysfs names with a '!'.
func TestMemberSamplerSlashNames(t *testing.T) {
	t.Parallel()
	p := newFakeProc(t)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		t.Fatal(err)
	}
	set := &memberSet{groups: []geometry.MemberGroup{{Device: "md0", Kind: vocab.MemberGroupMD, Members: []geometry.Member{{Device: "cciss!c0d0"}, {Device: "cciss!c0d1"}}}}}
	t0 := time.Now()
	p.write(diskLine{104, 0, "cciss/c0d0", 1, 8, 1, 1, 8, 1, 1}, diskLine{104, 16, "cciss/c0d1", 1, 8, 1, 1, 8, 1, 1})
	if _, err := s.sample(t0, set); err != nil {
		t.Fatal(err)
	}
	p.write(diskLine{104, 0, "cciss/c0d0", 5, 40, 4, 1, 8, 1, 5}, diskLine{104, 16, "cciss/c0d1", 5, 40, 4, 1, 8, 1, 5})
	got, err := s.sample(t0.Add(time.Minute), set)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.io.GetGroups()); n != 1 || len(got.io.GetGroups()[0].GetMembers()) != 2 {
		t.Fatalf("record %v (dropped %v), want md0 with both members", got.io, got.dropped)
	}
	if d := got.io.GetGroups()[0].GetMembers()[0].GetDevice(); d != "cciss!c0d0" {
		t.Errorf("member device = %q, want the sysfs name cciss!c0d0", d)
	}
}

// A group whose members did no I/O is not sent; one whose member was
// busy without completing anything is.
func TestMemberSamplerIdleGroup(t *testing.T) {
	t.Parallel()
	p := newFakeProc(t)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		t.Fatal(err)
	}
	lines := []diskLine{{8, 16, "sdb", 100, 800, 50, 200, 1600, 300, 400}, {8, 32, "sdc", 100, 800, 50, 200, 1600, 300, 400}}
	p.write(lines...)
	t0 := time.Now()
	set := raid5Set()
	if _, err := s.sample(t0, set); err != nil {
		t.Fatal(err)
	}
	got, err := s.sample(t0.Add(time.Minute), set)
	if err != nil || got.io != nil {
		t.Errorf("idle interval = %v, %v; want no record", got.io, err)
	}
	// A member busy all the interval without completing an operation (a
	// stall) is no idle group.
	lines[1].ioTicks += 60000
	p.write(lines...)
	got, err = s.sample(t0.Add(2*time.Minute), set)
	if err != nil || len(got.io.GetGroups()) != 1 {
		t.Fatalf("stalled interval = %v, %v; want md0 sent", got.io, err)
	}
	if m := got.io.GetGroups()[0].GetMembers()[1]; m.GetDevice() != "sdc" || m.GetIoTimeMs() != 60000 || m.GetReads()+m.GetWrites() != 0 {
		t.Errorf("stalled member = %v, want sdc busy 60000 ms with no operation", m)
	}
}

// The millisecond fields are 32-bit in /proc/diskstats: a read time that
// wraps is one interval's time, not a reset; an I/O time longer than the
// interval is.
func TestTicksDelta(t *testing.T) {
	t.Parallel()
	const top = 1<<32 - 1
	for _, c := range []struct {
		a, b, want uint64
		ok         bool
	}{
		{10, 25, 15, true},
		{top - 4, 5, 10, true},
		{1 << 31, 0, 1 << 31, true},
		{1000, 5, 0, false},          // lower half to lower: a reset
		{1 << 33, 5, 0, false},       // not a 32-bit field
		{top - 4, 1 << 31, 0, false}, // would be more than half the range
	} {
		got, ok := ticksDelta(c.a, c.b)
		if got != c.want || ok != c.ok {
			t.Errorf("ticksDelta(%d, %d) = %d, %v; want %d, %v", c.a, c.b, got, ok, c.want, c.ok)
		}
	}
	prev := map[string]devSample{"sdb": {8, 16, ioStats(10, top-100, 10, 0, 100)}}
	cur := map[string]devSample{"sdb": {8, 16, ioStats(20, 900, 10, 0, 1100)}}
	c, why := memberDelta(prev, cur, "sdb", time.Second)
	if why != "" || c.GetReadTimeMs() != 1001 {
		t.Errorf("wrapped read time: %v, %q; want 1001 ms", c, why)
	}
	cur["sdb"] = devSample{8, 16, ioStats(20, 900, 10, 0, 2101)}
	if _, why := memberDelta(prev, cur, "sdb", time.Second); why != memberDropBackwards {
		t.Errorf("2001 ms busy in a 1 s interval: %q, want %q", why, memberDropBackwards)
	}
}

func tsAt(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func ioStats(reads, readMs, writes, writeMs, ioMs uint64) blockdevice.IOStats {
	return blockdevice.IOStats{ReadIOs: reads, ReadTicks: readMs, WriteIOs: writes, WriteTicks: writeMs, IOsTotalTicks: ioMs}
}

// An md member's state is read at every sample, not only at discovery: a
// member that turned faulty since says so in the next interval; one whose
// dev-* directory cannot be read keeps the state discovery saw.
func TestMemberSamplerReadsMDStateAfresh(t *testing.T) {
	t.Parallel()
	p := newFakeProc(t)
	for dev, state := range map[string]string{"sdb": "faulty,write_error", "sdc": "in_sync"} {
		dir := filepath.Join(p.sys, "class", "block", "md0", "md", "dev-"+dev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set := raid5Set()
	set.states = geometry.NewMDStates(geometry.Options{SysfsRoot: p.sys}, set.groups)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	p.write(diskLine{8, 16, "sdb", 1, 8, 1, 1, 8, 1, 1}, diskLine{8, 32, "sdc", 1, 8, 1, 1, 8, 1, 1}, diskLine{8, 48, "sdd", 1, 8, 1, 1, 8, 1, 1})
	if _, err := s.sample(t0, set); err != nil {
		t.Fatal(err)
	}
	p.write(diskLine{8, 16, "sdb", 2, 16, 2, 1, 8, 1, 2}, diskLine{8, 32, "sdc", 9, 72, 9, 1, 8, 1, 9}, diskLine{8, 48, "sdd", 9, 72, 9, 1, 8, 1, 9})
	got, err := s.sample(t0.Add(time.Minute), set)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string][]string{}
	for _, m := range got.io.GetGroups()[0].GetMembers() {
		states[m.GetDevice()] = m.GetState()
	}
	want := map[string][]string{"sdb": {"faulty", "write_error"}, "sdc": {"in_sync"}, "sdd": {"in_sync"}}
	if diff := gocmp.Diff(want, states); diff != "" {
		t.Errorf("member states (-want +got):\n%s", diff)
	}
}

// BenchmarkMemberSample is one sample at the agent's bounds: 64 groups of
// 16 members (1,024 members, the most a record holds) found among 1,100
// /proc/diskstats lines.
func BenchmarkMemberSample(b *testing.B) {
	p := newFakeProc(b)
	var lines []diskLine
	set := &memberSet{ids: map[string]geometry.MemberIdentity{}}
	for g := range 64 {
		grp := geometry.MemberGroup{Device: fmt.Sprintf("md%d", g), Kind: vocab.MemberGroupMD, MountPoints: []string{fmt.Sprintf("/v%d", g)}}
		for m := range 16 {
			name := fmt.Sprintf("sd%d_%d", g, m)
			grp.Members = append(grp.Members, geometry.Member{Device: name, State: []string{"in_sync"}})
			lines = append(lines, diskLine{8, g*16 + m, name, 1, 8, 1, 1, 8, 1, 1})
		}
		set.groups = append(set.groups, grp)
	}
	for i := range 1100 - len(lines) {
		lines = append(lines, diskLine{259, i, fmt.Sprintf("nvme%dn1", i), 1, 8, 1, 1, 8, 1, 1})
	}
	p.write(lines...)
	s, err := newMemberSampler(p.proc, p.sys)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Minute)
		if _, err := s.sample(now, set); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDescribeGroups(t *testing.T) {
	t.Parallel()
	set := raid5Set()
	set.groups = append(set.groups, geometry.MemberGroup{Device: "dm-4", Kind: vocab.MemberGroupMirror, Members: []geometry.Member{{Device: "dm-1"}, {Device: "dm-3"}}})
	if got, want := describeGroups(set.groups), "md0 (md: sdb sdc sdd); dm-4 (mirror: dm-1 dm-3)"; got != want {
		t.Errorf("describeGroups = %q, want %q", got, want)
	}
	if got := describeGroups(nil); got != "" {
		t.Errorf("describeGroups(none) = %q, want empty", got)
	}
}
