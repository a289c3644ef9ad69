package align

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// mdVolume is ext4 straight on a 4-disk raid5 md array at a 1 MiB member
// data offset: aligned, whatever its health.
func mdVolume(h *plumblinev1.RaidHealth) *plumblinev1.Volume {
	disk := func(n string) *plumblinev1.Layer {
		return &plumblinev1.Layer{Kind: "disk", Device: n, LogicalSectorBytes: 512, PhysicalSectorBytes: 512, Source: "sysfs"}
	}
	return &plumblinev1.Volume{
		MountPoint: "/pgdata", Device: "/dev/md0",
		Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096, StripeUnitBytes: 64 << 10, StripeWidthBytes: 192 << 10},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/md0", FsType: "ext4", OffsetBytes: proto.Uint64(0), Source: "mountinfo", Below: []string{"md0"}},
			{Kind: "raid", Device: "md0", RaidLevel: "raid5", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 3, OffsetBytes: proto.Uint64(1 << 20),
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, Source: "sysfs", Below: []string{"sdb", "sdc", "sdd", "sde"}, RaidHealth: h},
			disk("sdb"), disk("sdc"), disk("sdd"), disk("sde"),
		},
	}
}

func member(name string, slot uint32, state ...string) *plumblinev1.RaidMember {
	return &plumblinev1.RaidMember{Device: name, Slot: proto.Uint32(slot), State: state}
}

// A critical health finding says so with its severity, but the verdict
// stays the alignment rules' (before health rules were kept apart, a
// faulty member made a well-aligned volume "misaligned").
func TestRAIDHealthLeavesVerdict(t *testing.T) {
	t.Parallel()
	h := &plumblinev1.RaidHealth{ArrayState: "clean", Degraded: proto.Uint32(1), SyncAction: "idle", Members: []*plumblinev1.RaidMember{
		member("sdb", 0, "in_sync"), member("sdc", 1, "in_sync"), {Device: "sdd", State: []string{"faulty"}}, member("sde", 3, "in_sync"),
	}}
	for _, o := range []Overrides{{}, {Severity: map[string]string{RuleRAIDMemberFaulty: Warning}}} {
		a := EvaluateWith(mdVolume(h), o)
		if a.GetVerdict() != Aligned {
			t.Errorf("EvaluateWith(%v) verdict = %s, want %s (findings %v)", o, a.GetVerdict(), Aligned, a.GetFindings())
		}
		want := Critical
		if o.Severity != nil {
			want = Warning
		}
		var got []string
		for _, f := range a.GetFindings() {
			if f.GetRule() == RuleRAIDMemberFaulty {
				got = append(got, f.GetSeverity())
			}
		}
		if !slices.Equal(got, []string{want}) {
			t.Errorf("EvaluateWith(%v) %s severities = %v, want [%s]", o, RuleRAIDMemberFaulty, got, want)
		}
	}
	if a := Evaluate(mdVolume(nil)); len(a.GetFindings()) != 0 {
		t.Errorf("Evaluate(no health) findings = %v, want none", a.GetFindings())
	}
}

// Every health rule is a rule, and the health rules are told apart.
func TestHealthRulesListed(t *testing.T) {
	t.Parallel()
	for _, r := range healthRules {
		if !slices.Contains(Rules(), r) {
			t.Errorf("Rules() does not list health rule %s", r)
		}
	}
	if IsHealthRule(RuleDataOffsetStripeUnit) || IsHealthRule(RuleRAIDReshapeRunning) || !IsHealthRule(RuleRAIDDegraded) {
		t.Error("IsHealthRule: want it true for health rules only")
	}
}

func TestRAIDHealthMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    *plumblinev1.RaidHealth
		want []string // rule: substring
	}{
		{"rebuild progress and time left", &plumblinev1.RaidHealth{ArrayState: "active", Degraded: proto.Uint32(1), SyncAction: "recover",
			SyncCompletedSectors: 430_000_000, SyncTotalSectors: 1_000_000_000, SyncSpeedBytesPerSecond: 100 << 20,
			Members: []*plumblinev1.RaidMember{member("sdb", 0, "in_sync"), member("sdc", 1, "in_sync"), member("sdd", 2, "in_sync"), member("sde", 3, "spare")}},
			[]string{RuleRAIDDegraded + ": 43% done", RuleRAIDRebuilding + ": about 46m left", RuleRAIDDegraded + ": no redundancy is left"}},
		{"frozen recovery", &plumblinev1.RaidHealth{ArrayState: "active", Degraded: proto.Uint32(1), SyncAction: "frozen",
			Members: []*plumblinev1.RaidMember{member("sdb", 0, "in_sync"), member("sdc", 1, "in_sync"), member("sdd", 2, "in_sync")}},
			[]string{RuleRAIDDegraded + ": frozen", RuleRAIDMemberRemoved + ": slots 3"}},
		{"repair rewrote", &plumblinev1.RaidHealth{ArrayState: "clean", Degraded: proto.Uint32(0), SyncAction: "idle", LastSyncAction: "repair", MismatchSectors: proto.Uint64(8),
			Members: []*plumblinev1.RaidMember{member("sdb", 0, "in_sync"), member("sdc", 1, "in_sync"), member("sdd", 2, "in_sync"), member("sde", 3, "in_sync")}},
			[]string{RuleRAIDMismatches + ": repair of md array md0 (raid5) rewrote 8 sectors"}},
		{"mismatches after a resync say nothing", &plumblinev1.RaidHealth{ArrayState: "clean", SyncAction: "idle", LastSyncAction: "resync", MismatchSectors: proto.Uint64(8)}, nil},
		{"unknown words judged as nothing", &plumblinev1.RaidHealth{ArrayState: "some-new-state", SyncAction: "some-new-action",
			Members: []*plumblinev1.RaidMember{member("sdb", 0, "in_sync", "new_flag"), member("sdc", 1, "in_sync"), member("sdd", 2, "in_sync"), member("sde", 3, "in_sync")}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := Evaluate(mdVolume(tt.h))
			var got []string
			for _, f := range a.GetFindings() {
				got = append(got, f.GetRule()+": "+f.GetMessage())
			}
			if tt.want == nil && len(got) != 0 {
				t.Errorf("findings = %q, want none", got)
			}
			for _, w := range tt.want {
				rule, text, _ := strings.Cut(w, ": ")
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, rule+": ") && strings.Contains(g, text) }) {
					t.Errorf("no %s finding saying %q in:\n%s", rule, text, strings.Join(got, "\n"))
				}
			}
		})
	}
}
