package config

import (
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/policy"
)

// intervals.member_io: 1m by default, 0s turns it off (and stays off
// through the printed effective configuration), bounded otherwise;
// central policy sets it like the other intervals.
func TestMemberIOInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		yaml   string
		want   time.Duration
		phrase string // of the error; "" valid
	}{
		{"", time.Minute, ""},
		{"intervals: {member_io: 0s}\n", 0, ""},
		{"intervals: {member_io: 10s}\n", 10 * time.Second, ""},
		{"intervals: {member_io: 1h}\n", time.Hour, ""},
		{"intervals: {member_io: 5s}\n", 0, "intervals.member_io 5s: want 0s (off) or 10s to 1h0m0s"},
		{"intervals: {member_io: 2h}\n", 0, "intervals.member_io 2h0m0s"},
		{"intervals: {member_io: -1m}\n", 0, "intervals.member_io -1m0s"},
	} {
		a, err := Parse([]byte(c.yaml))
		switch {
		case c.phrase != "":
			if err == nil || !strings.Contains(err.Error(), c.phrase) {
				t.Errorf("Parse(%q) error = %v, want one saying %q", c.yaml, err, c.phrase)
			}
		case err != nil:
			t.Errorf("Parse(%q) = %v", c.yaml, err)
		case a.Intervals.MemberIO != c.want:
			t.Errorf("Parse(%q) member_io = %s, want %s", c.yaml, a.Intervals.MemberIO, c.want)
		}
	}

	off, err := Parse([]byte("intervals: {member_io: 0s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	eff, o := Merge(off, nil)
	b, err := Print(eff, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil {
		t.Fatalf("the printed configuration does not parse: %v\n%s", err, b)
	}
	if again.Intervals.MemberIO != 0 {
		t.Errorf("member_io off printed and parsed again = %s, want 0s (off)\n%s", again.Intervals.MemberIO, b)
	}

	for _, local := range []Agent{Default(), off} {
		eff, o := Merge(local, &policy.Fragment{Intervals: policy.Intervals{MemberIO: 30 * time.Second}})
		if eff.Intervals.MemberIO != 30*time.Second || o["intervals"] != "central" {
			t.Errorf("Merge(local %s, central 30s) = %s (origin %s), want the central 30s", local.Intervals.MemberIO, eff.Intervals.MemberIO, o["intervals"])
		}
	}
	if eff, _ := Merge(Default(), &policy.Fragment{Intervals: policy.Intervals{Report: time.Minute}}); eff.Intervals.MemberIO != time.Minute {
		t.Errorf("Merge(central report only) member_io = %s, want the local 1m", eff.Intervals.MemberIO)
	}
}
