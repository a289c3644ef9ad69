package ingest

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// memberIORecord is a minute of an md raid5's three members and a
// multipath device's two paths, as the agent sends it.
func memberIORecord(seq uint64) *plumblinev1.Record {
	member := func(dev string) *plumblinev1.MemberCounters {
		return &plumblinev1.MemberCounters{Device: dev, ById: []string{"ata-VENDOR_" + dev, "wwn-0x5000c500" + dev}, Serial: "Z1" + dev,
			Reads: 6000, ReadTimeMs: 3000, Writes: 3000, WriteTimeMs: 6000, ReadSectors: 96000, WriteSectors: 48000, IoTimeMs: 20000,
			State: []string{"in_sync"}}
	}
	path := func(dev string) *plumblinev1.MemberCounters {
		return &plumblinev1.MemberCounters{Device: dev, Reads: 100, ReadTimeMs: 50, IoTimeMs: 40}
	}
	return &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(testNow), Payload: &plumblinev1.Record_MemberIo{MemberIo: &plumblinev1.MemberIO{
		StartedAt: timestamppb.New(testNow.Add(-time.Minute)), Interval: durationpb.New(time.Minute),
		Groups: []*plumblinev1.MemberGroup{
			{Device: "md0", Kind: "md", MountPoints: []string{"/pgdata"}, Members: []*plumblinev1.MemberCounters{member("sdb"), member("sdc"), member("sdd")}},
			{Device: "dm-4", Kind: "multipath", MountPoints: []string{"/pgwal"}, Members: []*plumblinev1.MemberCounters{path("sde"), path("sdf")}},
		},
	}}}
}

// The server takes member I/O as the kernel counts it and refuses what no
// device counts: unknown group kinds, names that are not names, md state on
// a path, busy time beyond the interval, a counter that went backwards
// (sent as a huge delta). A bad record is refused alone.
func TestValidateMemberIO(t *testing.T) {
	t.Parallel()
	mio := func(r *plumblinev1.Record) *plumblinev1.MemberIO { return r.GetMemberIo() }
	md := func(r *plumblinev1.Record) *plumblinev1.MemberGroup { return mio(r).Groups[0] }
	tests := []struct {
		name   string
		mutate func(r *plumblinev1.Record)
		want   string // "" accepted
	}{
		{"as sent", func(*plumblinev1.Record) {}, ""},
		{"an unknown md flag", func(r *plumblinev1.Record) { md(r).Members[0].State = []string{"in_sync", "future_flag"} }, ""},
		{"an idle member", func(r *plumblinev1.Record) { md(r).Members[2] = &plumblinev1.MemberCounters{Device: "sdd"} }, ""},
		{"busy a second past the interval", func(r *plumblinev1.Record) { md(r).Members[0].IoTimeMs = 61000 }, ""},
		{"no interval", func(r *plumblinev1.Record) { mio(r).Interval = nil }, "interval missing"},
		{"a zero interval", func(r *plumblinev1.Record) { mio(r).Interval = durationpb.New(0) }, "want above 0"},
		{"a week-long interval", func(r *plumblinev1.Record) { mio(r).Interval = durationpb.New(7 * 24 * time.Hour) }, "at most 24h"},
		{"no start", func(r *plumblinev1.Record) { mio(r).StartedAt = nil }, "started_at missing"},
		{"an unknown kind", func(r *plumblinev1.Record) { md(r).Kind = "zfs" }, `kind "zfs"`},
		{"a group twice", func(r *plumblinev1.Record) { mio(r).Groups[1].Device = "md0" }, "twice"},
		{"one member", func(r *plumblinev1.Record) { md(r).Members = md(r).Members[:1] }, "1 members: want 2"},
		{"a member twice", func(r *plumblinev1.Record) { md(r).Members[1].Device = "sdb" }, `"sdb" twice`},
		{"the group as its member", func(r *plumblinev1.Record) { md(r).Members[1].Device = "md0" }, "own device"},
		{"a path as a name", func(r *plumblinev1.Record) { md(r).Members[0].Device = "../sda" }, "without '/'"},
		{"a by-id path", func(r *plumblinev1.Record) { md(r).Members[0].ById = []string{"/dev/disk/by-id/x"} }, "by_id[0]"},
		{"a serial with a newline", func(r *plumblinev1.Record) { md(r).Members[0].Serial = "Z1\nZ2" }, "serial"},
		{"md state on a path", func(r *plumblinev1.Record) { mio(r).Groups[1].Members[0].State = []string{"in_sync"} }, "only md members"},
		{"a flag not a word", func(r *plumblinev1.Record) { md(r).Members[0].State = []string{"In Sync"} }, "state"},
		{"busy beyond the interval", func(r *plumblinev1.Record) { md(r).Members[0].IoTimeMs = 120000 }, "busy at most"},
		{"a counter gone backwards", func(r *plumblinev1.Record) { md(r).Members[1].Reads = math.MaxUint64 - 5 }, "reads"},
		{"request time beyond any queue", func(r *plumblinev1.Record) { md(r).Members[1].WriteTimeMs = 1 << 40 }, "write_time_ms"},
		{"a mount point with a newline", func(r *plumblinev1.Record) { md(r).MountPoints = []string{"/a\nb"} }, "mount_points[0]"},
		{"too many groups", func(r *plumblinev1.Record) {
			for i := range maxMemberGroups {
				mio(r).Groups = append(mio(r).Groups, &plumblinev1.MemberGroup{Device: fmt.Sprintf("md%d", i+10), Kind: "md"})
			}
		}, "groups: want at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := memberIORecord(2)
			tt.mutate(r)
			b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{probeRecord(1), r, probeRecord(3)}},
				Limits{MaxListLen: 4096}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Records) != 3 || b.Records[0].Kind != store.KindProbe || b.Records[2].Kind != store.KindProbe {
				t.Fatalf("records %v: want the two probe runs beside it stored whatever it is", b.Records)
			}
			switch {
			case tt.want == "" && len(b.Rejections) != 0:
				t.Fatalf("ValidateReport refused it: %v", b.Rejections)
			case tt.want == "" && (b.Records[1].Kind != store.KindMemberIO || b.Records[1].MemberIO == nil):
				t.Fatalf("record %+v: want member io", b.Records[1])
			case tt.want != "" && (len(b.Rejections) != 1 || !strings.Contains(b.Rejections[0].GetReason(), tt.want)):
				t.Fatalf("rejections %v: want one saying %q", b.Rejections, tt.want)
			}
		})
	}
}

// A good interval converts field by field.
func TestConvertMemberIO(t *testing.T) {
	t.Parallel()
	m, err := convertMemberIO(memberIORecord(1).GetMemberIo(), testNow, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	c := m.Groups[0].Members[2]
	if m.Interval != time.Minute || !m.StartedAt.Equal(testNow.Add(-time.Minute)) || len(m.Groups) != 2 ||
		m.Groups[0].Kind != "md" || m.Groups[1].MountPoints[0] != "/pgwal" ||
		c.Device != "sdd" || c.Serial != "Z1sdd" || len(c.ByID) != 2 || c.Reads != 6000 || c.ReadTimeMS != 3000 ||
		c.Writes != 3000 || c.WriteTimeMS != 6000 || c.ReadSectors != 96000 || c.WriteSectors != 48000 || c.IOTimeMS != 20000 || c.State[0] != "in_sync" {
		t.Errorf("convertMemberIO = %+v", m)
	}
}

// Over real gRPC with mTLS on both engines: member I/O is stored once (a
// replayed batch adds nothing), a bad interval is refused alone, and what
// is stored is what the member judge reads.
func TestReportMemberIO(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		bad := memberIORecord(2)
		bad.GetMemberIo().Groups[0].Members[1].Reads = math.MaxUint64 - 5 // a counter gone backwards
		req := &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{memberIORecord(1), bad, memberIORecord(3), probeRecord(4)}}
		for range 2 {
			resp, err := c.Report(ctxT(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetHighWaterSequence() != 4 || len(resp.GetRejections()) != 1 || resp.GetRejections()[0].GetSequence() != 2 {
				t.Fatalf("Report() = %v, want high water 4 and sequence 2 rejected", resp)
			}
		}
		got := dbRows(t, dsn, `SELECT sequence, kind FROM records WHERE agent_id = ? ORDER BY sequence`, "db1")
		if want := [][]string{{"1", "member-io"}, {"2", "rejected"}, {"3", "member-io"}, {"4", "probe"}}; !slicesEqual(want, got) {
			t.Errorf("stored records %v, want %v", got, want)
		}
		if n := dbRows(t, dsn, `SELECT COUNT(*) FROM member_io`)[0][0]; n != "10" {
			t.Errorf("member_io = %s rows after a replay, want 10 (2 intervals × 5 members)", n)
		}
		pending, err := e.store.PendingMemberIO(ctxT(t), 10)
		if err != nil || len(pending) != 2 {
			t.Fatalf("PendingMemberIO = %d intervals, %v; want 2", len(pending), err)
		}
		if g := pending[0].Groups; len(g) != 2 || g[1].Device != "md0" || len(g[1].Members) != 3 || g[1].Members[2].Serial != "Z1sdd" ||
			g[1].Members[2].ReadTimeMS != 3000 || pending[0].Interval != time.Minute {
			t.Errorf("first pending interval %+v", pending[0])
		}
	})
}

func slicesEqual(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}
