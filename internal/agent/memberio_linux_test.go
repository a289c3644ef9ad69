package agent

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// directIO does n 4 KiB O_DIRECT writes (or reads) at the start of the
// block device at path, so that they reach its queue and its
// /proc/diskstats line rather than the page cache.
func directIO(t *testing.T, path string, write bool, n int) {
	t.Helper()
	flag := os.O_RDONLY
	if write {
		flag = os.O_WRONLY
	}
	f, err := os.OpenFile(path, flag|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, 2*4096)
	off := int(4096 - uintptr(unsafe.Pointer(&raw[0]))%4096)
	buf := raw[off%4096 : off%4096+4096]
	for i := range n {
		if write {
			_, err = f.WriteAt(buf, int64(i)*4096)
		} else {
			_, err = f.ReadAt(buf, int64(i)*4096)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// realPair is a group of two fresh loop devices as an md array's members.
func realPair(t *testing.T) (a, b loopdev.Device, set *memberSet) {
	loopdev.Require(t)
	a = loopdev.New(t, loopdev.Options{SizeBytes: 16 << 20})
	b = loopdev.New(t, loopdev.Options{SizeBytes: 16 << 20})
	g := geometry.MemberGroup{Device: "md9", Kind: vocab.MemberGroupMD, MountPoints: []string{"/lab"},
		Members: []geometry.Member{{Device: a.Name, State: []string{"in_sync"}}, {Device: b.Name, State: []string{"in_sync"}}}}
	return a, b, &memberSet{groups: []geometry.MemberGroup{g}, ids: geometry.MemberIdentities(geometry.DefaultOptions(), []string{a.Name, b.Name})}
}

// The kernel's own accounting: I/O done on two real loop devices shows in
// the interval's deltas of the device that did it, sector for sector.
func TestMemberSamplerRealLoopDevices(t *testing.T) {
	t.Parallel()
	a, b, set := realPair(t)
	s, err := newMemberSampler("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := s.sample(t0, set); err != nil {
		t.Fatal(err)
	}
	directIO(t, a.Path, true, 64)
	directIO(t, b.Path, false, 32)
	got, err := s.sample(time.Now(), set)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.io.GetGroups()); n != 1 {
		t.Fatalf("record %v: %d groups, want 1 (dropped %v)", got.io, n, got.dropped)
	}
	by := map[string]*plumblinev1.MemberCounters{}
	for _, m := range got.io.GetGroups()[0].GetMembers() {
		by[m.GetDevice()] = m
	}
	ma, mb := by[a.Name], by[b.Name]
	if ma == nil || mb == nil {
		t.Fatalf("members %v, want %s and %s", by, a.Name, b.Name)
	}
	if ma.GetWriteSectors() != 64*8 || ma.GetWrites() == 0 {
		t.Errorf("%s wrote %d sectors in %d requests, want 512 sectors", a.Name, ma.GetWriteSectors(), ma.GetWrites())
	}
	if mb.GetWrites() != 0 || mb.GetReadSectors() < 32*8 || mb.GetReads() == 0 {
		t.Errorf("%s: %d writes, %d sectors read in %d requests; want no writes and at least 256 sectors read", b.Name, mb.GetWrites(), mb.GetReadSectors(), mb.GetReads())
	}
	if iv := got.io.GetInterval().AsDuration(); iv <= 0 || time.Duration(ma.GetIoTimeMs())*time.Millisecond > iv+time.Second {
		t.Errorf("interval %s, %s busy %d ms", iv, a.Name, ma.GetIoTimeMs())
	}
}

// End to end on real devices: an agent whose discovery finds an md array
// over two real loop devices sends member I/O records over mutual TLS to
// the production ingest, which validates and stores them (SQLite); the
// writes done on one member are stored as that member's.
func TestMemberIOEndToEndRealDevices(t *testing.T) {
	t.Parallel()
	a, b, _ := realPair(t)
	p := newPKI(t, "db1")
	srv := startRealServer(t, p, "sqlite://"+filepath.Join(t.TempDir(), "server.db"))
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes = nil
	c.Intervals.MemberIO = 100 * time.Millisecond
	discover := func(context.Context) (Discovery, error) {
		return Discovery{Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}, Volumes: []*plumblinev1.Volume{{
			MountPoint: "/lab", Device: "/dev/md9",
			Layers: []*plumblinev1.Layer{{Kind: "filesystem", Device: "/dev/md9", Below: []string{"md9"}},
				{Kind: "raid", Device: "md9", RaidLevel: "raid1", Below: []string{a.Name, b.Name}, Source: "sysfs"}},
		}}}}, nil
	}
	ag := newTestAgent(t, c, p, nil, discover)
	runAgent(t, ag)
	var written uint64
	waitFor(t, "a stored member I/O interval with the writes on "+a.Name, func() bool {
		directIO(t, a.Path, true, 8)
		ivs, err := srv.st.PendingMemberIO(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		written = 0
		for _, iv := range ivs {
			for _, g := range iv.Groups {
				for _, m := range g.Members {
					if m.Device == a.Name && g.Device == "md9" && g.Kind == "md" && len(g.Members) == 2 && slices.Equal(g.MountPoints, []string{"/lab"}) {
						written += m.WriteSectors
					}
				}
			}
		}
		return written > 0
	})
	if written%8 != 0 {
		t.Errorf("%s: %d sectors written, want whole 4 KiB writes", a.Name, written)
	}
	rec := httptest.NewRecorder()
	ag.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, "plumbline_agent_member_io_groups 1\n") || strings.Contains(body, "plumbline_agent_member_io_records_total 0\n") ||
		!strings.Contains(body, "plumbline_agent_member_io_records_total") || !strings.Contains(body, "plumbline_agent_records_rejected_total 0\n") {
		t.Errorf("agent metrics: want 1 group, records counted, none rejected:\n%s", grepLines(body, "member_io"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
