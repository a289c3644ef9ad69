package exporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/store"
)

// memberIO is a minute of md0's three members, sdd taking readMS a read.
func memberIO(seq uint64, at time.Time, readMS uint64) store.Record {
	m := func(dev string, ms uint64) store.MemberCounters {
		return store.MemberCounters{Device: dev, State: []string{"in_sync"}, Reads: 1000, ReadTimeMS: 1000 * ms, ReadSectors: 16000, IOTimeMS: 1000 * ms}
	}
	sdd := m("sdd", readMS)
	sdd.ByID, sdd.Serial = []string{"ata-ST4000_ZC1", "wwn-0x5000c5"}, "ZC1"
	return store.Record{Sequence: seq, Kind: store.KindMemberIO, ProducedAt: at, Payload: []byte{1}, MemberIO: &store.MemberIO{
		StartedAt: at, Interval: time.Minute, Groups: []store.MemberGroup{{Device: "md0", Kind: "md", MountPoints: []string{"/data"},
			Members: []store.MemberCounters{m("sdb", 2), m("sdc", 2), sdd}}}}}
}

// A member the sibling judge names has one series, with its identity and
// ratio; its siblings and a cleared member have none.
func TestSlowMemberSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "db1.example.com"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.Record
	for i := range 5 {
		recs = append(recs, memberIO(uint64(i+1), t0.Add(time.Duration(i)*time.Minute), 8))
	}
	if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
		t.Fatal(err)
	}
	j := members.New(st, members.Options{})
	if _, err := j.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	opts := fixedOptions()
	opts.MaxAge = time.Nanosecond
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := `plumbline_raid_member_slow_ratio{agent_id="a1",array="md0",by_id="ata-ST4000_ZC1",direction="read",host="db1.example.com",kind="md",member="sdd",serial="ZC1"} 4`
	if got := scrape(t, c); !strings.Contains(got, want+"\n") || strings.Count(got, "plumbline_raid_member_slow_ratio{") != 1 {
		t.Fatalf("exposition lacks\n%s\nas the one slow member series:\n%s", want, grepLines(got, "raid_member"))
	}
	recs = recs[:0]
	for i := range 3 {
		recs = append(recs, memberIO(uint64(6+i), t0.Add(time.Duration(5+i)*time.Minute), 2))
	}
	if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, c); strings.Contains(got, "plumbline_raid_member_slow_ratio{") {
		t.Fatalf("a cleared member still has a series:\n%s", grepLines(got, "raid_member"))
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
