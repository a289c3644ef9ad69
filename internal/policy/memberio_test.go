package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// intervals.member_io in a policy: bounded as the agent bounds it, and
// the first matching entry that sets it wins.
func TestMemberIOIntervalPolicy(t *testing.T) {
	t.Parallel()
	err := Validate([]Entry{{Name: "a", Policy: Fragment{Intervals: Intervals{MemberIO: time.Second}}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "intervals.member_io 1s") {
		t.Errorf("Validate(member_io 1s) = %v, want intervals.member_io refused", err)
	}
	entries := []Entry{
		{Name: "first", Select: Selector{Hosts: []string{"db-*"}}, Policy: Fragment{Intervals: Intervals{Report: time.Minute}}},
		{Name: "second", Select: Selector{Hosts: []string{"db-*"}}, Policy: Fragment{Intervals: Intervals{MemberIO: 30 * time.Second}}},
		{Name: "third", Select: Selector{Hosts: []string{"db-*"}}, Policy: Fragment{Intervals: Intervals{MemberIO: 5 * time.Minute}}},
	}
	if err := Validate(entries); err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(entries, Facts{Hostname: "db-1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Fragment.Intervals.MemberIO != 30*time.Second || r.Fragment.Intervals.Report != time.Minute {
		t.Errorf("Resolve intervals = %+v, want report 1m and member_io 30s", r.Fragment.Intervals)
	}
	f, err := ParseFragment(r.YAML)
	if err != nil || f.Intervals.MemberIO != 30*time.Second {
		t.Errorf("ParseFragment(resolved YAML) = %+v, %v; want member_io 30s\n%s", f.Intervals, err, r.YAML)
	}
}
