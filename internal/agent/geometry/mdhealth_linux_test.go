package geometry

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/plumbline/plumbline/internal/align"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// mdMember is one dev-* directory of an md array in a health tree: its
// files as the kernel writes them ("" leaves a file out).
type mdMember struct {
	name, state, slot, errors, badBlocks string
}

// mdHealthCase is an md array on whole disks with ext4 on it, written in
// the formats of the kernel's Documentation/admin-guide/md.rst, or taken
// from a captured fixture (as the comment says).
type mdHealthCase struct {
	name, level, raidDisks string
	md                     map[string]string // md/<file> -> value
	members                []mdMember
	wantRules              []string // health rules align finds, sorted
	wantText               []string // substrings of the findings' messages
	check                  func(t *testing.T, h *plumblinev1.RaidHealth)
	// mdstat is /proc/mdstat (none when empty); source is where the
	// health must come from (sysfs when empty).
	mdstat, source string
}

// tree writes the case as a tree file (tree_test.go's directives): every
// member is a SAS disk, listed in slaves/ and md/dev-*; a removed member
// is neither.
func (c mdHealthCase) tree() string {
	var b strings.Builder
	b.WriteString("mount 40 25 9:0 / /pgdata rw,noatime - ext4 /dev/md0 rw\n")
	disk := func(i int, name string) string {
		return fmt.Sprintf("devices/pci0/host0/target0:0:%d/0:0:%d:0/block/%s", i, i, name)
	}
	for i, m := range c.members {
		d := disk(i, m.name)
		fmt.Fprintf(&b, "dev 8:%d %s\nfile sys/%s/size 1172123568\nqueue %s 512 512 512 0 1\n", 16*(i+1), d, d, d)
		fmt.Fprintf(&b, "link sys/devices/virtual/block/md0/slaves/%s ../../../../../%s\n", m.name, d)
		dir := "sys/devices/virtual/block/md0/md/dev-" + m.name + "/"
		fmt.Fprintf(&b, "file %soffset 2048\n", dir)
		for _, f := range [][2]string{{"state", m.state}, {"slot", m.slot}, {"errors", m.errors}} {
			if f[1] != "" {
				fmt.Fprintf(&b, "file %s%s %s\n", dir, f[0], f[1])
			}
		}
		if m.badBlocks != "" {
			fmt.Fprintf(&b, "text %sbad_blocks\n%s\nend\n", dir, strings.ReplaceAll(m.badBlocks, "|", "\n"))
		}
	}
	if c.mdstat != "" {
		fmt.Fprintf(&b, "text proc/mdstat\n%send\n", c.mdstat)
	}
	b.WriteString("dev 9:0 devices/virtual/block/md0\nfile sys/devices/virtual/block/md0/size 3516370944\nqueue devices/virtual/block/md0 512 512 65536 196608 0\n")
	md := map[string]string{"level": c.level, "raid_disks": c.raidDisks, "chunk_size": "65536", "layout": "2"}
	for k, v := range c.md {
		md[k] = v
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range md {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "file sys/devices/virtual/block/md0/md/%s %s\n", k, md[k])
	}
	return b.String()
}

// healthy is the md files of an idle, clean array.
func healthy(extra ...string) map[string]string {
	m := map[string]string{"array_state": "clean", "degraded": "0", "sync_action": "idle", "sync_completed": "none",
		"sync_speed": "none", "mismatch_cnt": "0", "last_sync_action": "check"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func inSync(name, slot string) mdMember {
	return mdMember{name: name, state: "in_sync", slot: slot, errors: "0", badBlocks: ""}
}

// procfsMDStat is prometheus/procfs' /proc/mdstat fixture with the array
// named target renamed md0 (the case's array) and its own md0 out of the
// way.
func procfsMDStat(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/procfs-mdstat.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "# ") {
			continue
		}
		switch {
		case strings.HasPrefix(l, "md0 :"):
			l = "md1000 :" + strings.TrimPrefix(l, "md0 :")
		case strings.HasPrefix(l, target+" :"):
			l = "md0 :" + strings.TrimPrefix(l, target+" :")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func mdHealthCases(t *testing.T) []mdHealthCase {
	four := []mdMember{inSync("sdb", "0"), inSync("sdc", "1"), inSync("sdd", "2"), inSync("sde", "3")}
	return slices.Concat(mdHealthCases1(four), mdHealthCases2(four), mdStatCases(t))
}

// mdHealthCases1 are healthy arrays, failed and removed members, and
// running rebuilds.
func mdHealthCases1(four []mdMember) []mdHealthCase {
	return []mdHealthCase{
		{name: "healthy raid1", level: "raid1", raidDisks: "2", md: healthy(), members: four[:2]},
		{name: "healthy raid5", level: "raid5", raidDisks: "4", md: healthy(), members: four},
		{name: "healthy raid10", level: "raid10", raidDisks: "4", md: healthy("layout", "258"), members: four},
		{
			// node_exporter's miss: the failed member is still listed and
			// the array reads clean; a count of members sees 4 of 4.
			name: "faulty member still listed", level: "raid5", raidDisks: "4",
			md:        healthy("degraded", "1"),
			members:   []mdMember{four[0], four[1], {name: "sdd", state: "faulty", slot: "none", errors: "38"}, four[3]},
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDMemberFaulty},
			wantText:  []string{"member sdd of md array md0 (raid5) is faulty", "array_state still reads clean", "no redundancy is left", "no spare is listed"},
		},
		{
			// The other miss: a removed member leaves no trace in dev-*.
			name: "removed member", level: "raid5", raidDisks: "4",
			md:        healthy("degraded", "1"),
			members:   []mdMember{four[0], four[1], four[3]},
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDMemberRemoved},
			wantText:  []string{"(slots 2) have no member at all"},
		},
		{
			name: "degraded and recovering at 43%", level: "raid1", raidDisks: "2",
			md:      healthy("degraded", "1", "sync_action", "recover", "sync_completed", "430000 / 1000000", "sync_speed", "102400"),
			members: []mdMember{four[0], {name: "sdc", state: "spare", slot: "1", errors: "0"}},
			// 570000 sectors at 100 MiB/s: 2.8 s, rounded to minutes.
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDRebuilding},
			wantText:  []string{"recovery is running, 43% done (209.96 MiB of 488.28 MiB), 100 MiB/s", "one copy is left"},
			check: func(t *testing.T, h *plumblinev1.RaidHealth) {
				if h.GetSyncCompletedSectors() != 430000 || h.GetSyncTotalSectors() != 1000000 || h.GetSyncSpeedBytesPerSecond() != 100<<20 {
					t.Errorf("sync = %d / %d at %d B/s, want 430000 / 1000000 at %d", h.GetSyncCompletedSectors(), h.GetSyncTotalSectors(), h.GetSyncSpeedBytesPerSecond(), 100<<20)
				}
			},
		},
		{
			name: "resync after an unclean shutdown", level: "raid1", raidDisks: "2",
			md:        healthy("array_state", "active", "sync_action", "resync", "sync_completed", "delayed"),
			members:   four[:2],
			wantRules: []string{align.RuleRAIDRebuilding},
			wantText:  []string{"a resync (making its copies consistent): delayed"},
		},
		{
			name: "reshape", level: "raid5", raidDisks: "5 (4)",
			md: healthy("reshape_position", "1048576", "sync_action", "reshape", "sync_completed", "2500 / 10000", "sync_speed", "2048"),
			members: append(append([]mdMember(nil), four...),
				mdMember{name: "sdf", state: "in_sync", slot: "4", errors: "0"}),
			wantRules: []string{align.RuleRAIDReshapeRunning},
			wantText:  []string{"raid_disks 4 -> 5; 25% done"},
		},
	}
}

// mdHealthCases2 are the cases of a finished or running check, odd array
// states, members with errors, and captured fixtures.
func mdHealthCases2(four []mdMember) []mdHealthCase {
	return []mdHealthCase{
		{
			name: "check found mismatches", level: "raid10", raidDisks: "4",
			md:        healthy("layout", "258", "mismatch_cnt", "128"),
			members:   four,
			wantRules: []string{align.RuleRAIDMismatches},
			wantText:  []string{"a check of md array md0 (raid10) found 128 sectors"},
		},
		{
			name: "check running", level: "raid6", raidDisks: "4",
			md:        healthy("layout", "2", "sync_action", "check", "sync_completed", "1 / 4", "last_sync_action", "none"),
			members:   four,
			wantRules: []string{align.RuleRAIDCheckRunning},
		},
		{
			name: "read-auto", level: "raid1", raidDisks: "2",
			md: healthy("array_state", "read-auto"), members: four[:2],
			wantRules: []string{align.RuleRAIDReadOnly},
		},
		{
			name: "broken raid0", level: "raid0", raidDisks: "2",
			md: map[string]string{"array_state": "broken"}, members: four[:1],
			wantRules: []string{align.RuleRAIDMemberRemoved, align.RuleRAIDNotRunning},
		},
		{
			name: "inactive", level: "raid5", raidDisks: "4",
			md:        map[string]string{"array_state": "inactive"},
			members:   []mdMember{{name: "sdb", state: "spare", slot: "none"}, {name: "sdc", state: "spare", slot: "none"}},
			wantRules: []string{align.RuleRAIDNotRunning},
		},
		{
			name: "member with errors and bad blocks", level: "raid1", raidDisks: "2",
			md:        healthy(),
			members:   []mdMember{four[0], {name: "sdc", state: "in_sync,write_error,want_replacement", slot: "1", errors: "12", badBlocks: "1000 8|2048 16"}},
			wantRules: []string{align.RuleRAIDMemberErrors},
			wantText:  []string{"12 read error(s) corrected, 2 bad-block range(s) (24 sectors)", "write error seen", "marked for replacement"},
		},
		{
			name: "blocked member", level: "raid1", raidDisks: "2",
			md: healthy(), members: []mdMember{four[0], {name: "sdc", state: "in_sync,blocked", slot: "1", errors: "0"}},
			wantRules: []string{align.RuleRAIDMemberBlocked},
		},
		{
			// prometheus/procfs testdata/fixtures.ttar, sys/block/md5
			// (Apache-2.0): raid5, degraded 1, one member faulty, one
			// spare; no slot files.
			name: "procfs md5 fixture", level: "raid5", raidDisks: "3",
			md:        map[string]string{"array_state": "clean", "degraded": "1", "sync_action": "idle", "sync_completed": "none"},
			members:   []mdMember{{name: "sdaa", state: "spare"}, {name: "sdn", state: "in_sync"}, {name: "sdo", state: "in_sync"}, {name: "sdp", state: "faulty"}},
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDMemberFaulty},
		},
		{
			// prometheus/procfs testdata/fixtures.ttar, sys/block/md6
			// (Apache-2.0): raid6 recovering onto a spare.
			name: "procfs md6 fixture", level: "raid6", raidDisks: "4",
			md:        map[string]string{"array_state": "active", "degraded": "1", "sync_action": "recover", "sync_completed": "1569888 / 2093056"},
			members:   []mdMember{{name: "sdq", state: "in_sync"}, {name: "sdr", state: "in_sync"}, {name: "sds", state: "in_sync"}, {name: "sdt", state: "spare"}},
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDRebuilding},
			wantText:  []string{"75% done", "one parity is left"},
		},
	}
}

// mdStatCases are arrays on a kernel without md's sysfs health: what
// /proc/mdstat says.
func mdStatCases(t *testing.T) []mdHealthCase {
	return []mdHealthCase{
		{
			// A kernel without md/array_state and dev-*/state: procfs'
			// /proc/mdstat, its md6 (raid1 recovering onto a spare, one
			// member failed).
			name: "mdstat: recovering, one member failed", level: "raid1", raidDisks: "2",
			md:        map[string]string{},
			members:   []mdMember{{name: "sda2"}, {name: "sdb2"}, {name: "sdc"}},
			mdstat:    procfsMDStat(t, "md6"),
			source:    SourceMDStat,
			wantRules: []string{align.RuleRAIDDegraded, align.RuleRAIDMemberFaulty, align.RuleRAIDRebuilding},
			wantText:  []string{"8.59% done", "member sdb2 of md array md0 (raid1) is faulty"},
		},
		{
			// procfs' md11: "active (auto-read-only)", resync=PENDING.
			name: "mdstat: auto-read-only, resync pending", level: "raid1", raidDisks: "2",
			md:        map[string]string{},
			members:   []mdMember{{name: "sdb2"}, {name: "sdc2"}, {name: "sdc3"}, {name: "hda"}, {name: "ssdc2"}},
			mdstat:    procfsMDStat(t, "md11"),
			source:    SourceMDStat,
			wantRules: []string{align.RuleRAIDMemberFaulty, align.RuleRAIDReadOnly, align.RuleRAIDRebuilding},
			check: func(t *testing.T, h *plumblinev1.RaidHealth) {
				if h.GetArrayState() != "read-auto" || h.GetDegraded() != 0 {
					t.Errorf("array_state %q degraded %d, want read-auto, 0", h.GetArrayState(), h.GetDegraded())
				}
			},
		},
	}
}

// The md health trees: what discovery reads, and what the health rules
// make of it, end to end; the alignment verdict is never changed by them.
func TestMDHealthTrees(t *testing.T) {
	t.Parallel()
	for _, c := range mdHealthCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			buildTree(t, []byte(c.tree()), root)
			vols, err := Discover(context.Background(), treeOptions(root))
			if err != nil {
				t.Fatal(err)
			}
			v := volumeAt(vols, "/pgdata")
			if v == nil || len(v.Layers) < 2 {
				t.Fatalf("Discover: no md volume at /pgdata: %v", vols)
			}
			md := v.Layers[1]
			if src := cmp.Or(c.source, SourceSysfs); md.GetSources()["raid_health"] != src {
				t.Errorf("sources[raid_health] = %q, want %q (unknown: %v)", md.GetSources()["raid_health"], src, md.GetUnknown())
			}
			h := md.GetRaidHealth()
			if h == nil {
				t.Fatalf("md0 has no raid_health (unknown: %v)", md.GetUnknown())
			}
			if len(h.GetMembers()) != len(c.members) {
				t.Errorf("raid_health lists %d members, want %d", len(h.GetMembers()), len(c.members))
			}
			if c.check != nil {
				c.check(t, h)
			}
			a := align.Evaluate(v)
			var rules, msgs []string
			for _, f := range a.GetFindings() {
				if align.IsHealthRule(f.GetRule()) || f.GetRule() == align.RuleRAIDReshapeRunning {
					rules = append(rules, f.GetRule())
					msgs = append(msgs, f.GetMessage())
				}
			}
			slices.Sort(rules)
			if diff := gocmp.Diff(c.wantRules, rules); diff != "" {
				t.Errorf("health findings (-want +got):\n%s\n%s", diff, strings.Join(msgs, "\n"))
			}
			all := strings.Join(msgs, "\n")
			for _, w := range c.wantText {
				if !strings.Contains(all, w) {
					t.Errorf("findings do not say %q:\n%s", w, all)
				}
			}
			if a.GetVerdict() == align.Misaligned {
				t.Errorf("verdict %s: health findings must not make a volume misaligned (%v)", a.GetVerdict(), a.GetFindings())
			}
		})
	}
}

// A /proc/mdstat that procfs' parser panics on (a one-character word on
// the Personalities line) is an unknown with the reason, not a crash.
func TestMDStatPanicIsUnknown(t *testing.T) {
	t.Parallel()
	c := mdHealthCase{level: "raid1", raidDisks: "2", md: map[string]string{},
		members: []mdMember{{name: "sdb"}, {name: "sdc"}},
		mdstat:  "Personalities : [raid1] x\nmd0 : active raid1 sdb[0] sdc[1]\n      100 blocks [2/2] [UU]\n\nunused devices: <none>\n"}
	root := t.TempDir()
	buildTree(t, []byte(c.tree()), root)
	vols, err := Discover(context.Background(), treeOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	v := volumeAt(vols, "/pgdata")
	if v == nil || len(v.Layers) < 2 {
		t.Fatalf("Discover: no md volume at /pgdata: %v", vols)
	}
	md := v.Layers[1]
	if md.GetRaidHealth() != nil || !strings.Contains(unknownOf(md, "raid_health"), "parse mdstat") {
		t.Errorf("raid_health = %v, unknown %q: want none, and an unknown saying parse mdstat", md.GetRaidHealth(), unknownOf(md, "raid_health"))
	}
}

func unknownOf(l *plumblinev1.Layer, field string) string {
	for _, u := range l.GetUnknown() {
		if u.GetField() == field {
			return u.GetReason()
		}
	}
	return ""
}
