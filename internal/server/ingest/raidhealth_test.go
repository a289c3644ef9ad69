package ingest

import (
	"fmt"
	"strings"
	"testing"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// mdVolume is ext4 on a degraded raid5 md array recovering onto a spare,
// as the agent reports it.
func mdVolume() *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: "/pgdata", Device: "/dev/md0",
		Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/md0", FsType: "ext4", OffsetBytes: u64(0), Source: "mountinfo", Below: []string{"md0"}},
			{Kind: "raid", Device: "md0", RaidLevel: "raid5", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 3, OffsetBytes: u64(1 << 20),
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, Source: "sysfs",
				RaidHealth: &plumblinev1.RaidHealth{
					ArrayState: "active", Degraded: proto.Uint32(1), SyncAction: "recover",
					SyncCompletedSectors: 430, SyncTotalSectors: 1000, SyncSpeedBytesPerSecond: 100 << 20,
					MismatchSectors: proto.Uint64(0), LastSyncAction: "check",
					Members: []*plumblinev1.RaidMember{
						{Device: "sdb", State: []string{"in_sync"}, Slot: proto.Uint32(0)},
						{Device: "sdc", State: []string{"in_sync"}, Slot: proto.Uint32(1), Errors: 3, BadBlocks: 2, BadBlockSectors: 24},
						{Device: "sdd", State: []string{"faulty"}},
						{Device: "sde", State: []string{"spare", "some_future_flag"}, Slot: proto.Uint32(3)},
					},
				}},
		},
	}
}

// The server accepts an md array's health as the agent reads it, unknown
// words included, and refuses what cannot be md's: words that are not
// words, counts that do not add up.
func TestValidateRAIDHealth(t *testing.T) {
	t.Parallel()
	health := func(v *plumblinev1.Volume) *plumblinev1.RaidHealth { return v.Layers[1].RaidHealth }
	tests := []struct {
		name   string
		mutate func(v *plumblinev1.Volume)
		want   string // "" accepted
	}{
		{"as read", func(*plumblinev1.Volume) {}, ""},
		{"an unknown array state", func(v *plumblinev1.Volume) { health(v).ArrayState = "some-new-state" }, ""},
		{"during a shrinking reshape", func(v *plumblinev1.Volume) {
			v.Layers[1].RaidDisks, v.Layers[1].Reshape = 3, &plumblinev1.RaidReshape{PreviousRaidDisks: 4}
		}, ""},
		{"on a disk layer", func(v *plumblinev1.Volume) { v.Layers[1].Kind = "disk" }, "want a raid layer"},
		{"array state not a word", func(v *plumblinev1.Volume) { health(v).ArrayState = "clean; rm -rf" }, "array_state"},
		{"sync action too long", func(v *plumblinev1.Volume) { health(v).SyncAction = strings.Repeat("a", 33) }, "sync_action"},
		{"more degraded than disks", func(v *plumblinev1.Volume) { health(v).Degraded = proto.Uint32(5) }, "degraded 5 of 4"},
		{"done above total", func(v *plumblinev1.Volume) { health(v).SyncCompletedSectors = 1001 }, "above sync_total_sectors"},
		{"delayed with progress", func(v *plumblinev1.Volume) { health(v).SyncDelayed = true }, "delayed"},
		{"slot beyond the array", func(v *plumblinev1.Volume) { health(v).Members[0].Slot = proto.Uint32(4) }, "slot 4 of an array of 4"},
		{"a member twice", func(v *plumblinev1.Volume) { health(v).Members[1].Device = "sdb" }, "unique name"},
		{"a member without a name", func(v *plumblinev1.Volume) { health(v).Members[1].Device = "" }, "unique name"},
		{"a flag twice", func(v *plumblinev1.Volume) { health(v).Members[0].State = []string{"in_sync", "in_sync"} }, "twice"},
		{"a flag not a word", func(v *plumblinev1.Volume) { health(v).Members[0].State = []string{"In Sync"} }, "state"},
		{"too many flags", func(v *plumblinev1.Volume) {
			health(v).Members[0].State = strings.Split("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", ",")
		}, "17 state flags"},
		{"bad-block ranges over fewer sectors", func(v *plumblinev1.Volume) { health(v).Members[1].BadBlockSectors = 1 }, "each covers one sector"},
		{"too many bad-block ranges", func(v *plumblinev1.Volume) {
			health(v).Members[1].BadBlocks, health(v).Members[1].BadBlockSectors = 1<<20, 1<<30
		}, "bad-block ranges: want at most"},
		{"too many members", func(v *plumblinev1.Volume) {
			h := health(v)
			for i := range 1100 {
				h.Members = append(h.Members, &plumblinev1.RaidMember{Device: fmt.Sprintf("m%d", i)})
			}
		}, "1104 members: want at most 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mdVolume()
			tt.mutate(v)
			// Generic list bounds may be raised by a site; the member
			// bound holds whatever they are.
			b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{geometryRecord(1, v)}}, Limits{MaxListLen: 4096}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(b.Rejections) != 0:
				t.Fatalf("ValidateReport refused it: %v", b.Rejections)
			case tt.want != "" && (len(b.Rejections) != 1 || !strings.Contains(b.Rejections[0].GetReason(), tt.want)):
				t.Fatalf("rejections %v: want one saying %q", b.Rejections, tt.want)
			}
		})
	}
}

// The judged record counts an md array's missing members from the kernel's
// health when the agent sent it: a member md failed but still lists is
// missing, as is a removed one, while a replacement being rebuilt fills no
// role yet. Without health it counts the member devices listed.
func TestArraysMissingMembers(t *testing.T) {
	t.Parallel()
	member := func(dev string, slot *uint32, state ...string) *plumblinev1.RaidMember {
		return &plumblinev1.RaidMember{Device: dev, State: state, Slot: slot}
	}
	s0, s1 := proto.Uint32(0), proto.Uint32(1)
	tests := []struct {
		name    string
		below   []string
		members []*plumblinev1.RaidMember // nil: no health sent
		want    int
	}{
		{"complete, no health", []string{"sda", "sdb"}, nil, 0},
		{"one not listed, no health", []string{"sda"}, nil, 1},
		{"complete", []string{"sda", "sdb"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync"), member("sdb", s1, "in_sync")}, 0},
		{"a faulty member still listed", []string{"sda", "sdb"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync"), member("sdb", nil, "faulty")}, 1},
		{"faulty with its role still set", []string{"sda", "sdb"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync"), member("sdb", s1, "faulty", "in_sync")}, 1},
		{"a member removed", []string{"sda"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync")}, 1},
		{"recovering onto a spare", []string{"sda", "sdc"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync"), member("sdc", s1)}, 1},
		{"only a spare beside it", []string{"sda", "sdc"}, []*plumblinev1.RaidMember{member("sda", s0, "in_sync"), member("sdc", nil, "spare")}, 1},
		{"a replacement being rebuilt", []string{"sda", "sdb", "sdc"}, []*plumblinev1.RaidMember{
			member("sda", s0, "in_sync"), member("sdb", s1, "in_sync", "want_replacement"), member("sdc", s1, "replacement")}, 0},
		{"a replacement done beside its original", []string{"sda", "sdb", "sdc"}, []*plumblinev1.RaidMember{
			member("sda", s0, "in_sync"), member("sdb", s1, "in_sync", "want_replacement"), member("sdc", s1, "in_sync", "replacement")}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := mdVolume()
			l := v.Layers[1]
			l.RaidLevel, l.RaidDisks, l.RaidDataDisks, l.Below = "raid1", 2, 1, tt.below
			l.Sources = map[string]string{"raid_disks": "sysfs"}
			l.RaidHealth = nil
			if tt.members != nil {
				l.RaidHealth = &plumblinev1.RaidHealth{ArrayState: "active", Members: tt.members}
			}
			sv, err := judgeVolume(v, nil, Rules{})
			if err != nil {
				t.Fatal(err)
			}
			if got := sv.Judged.Arrays; len(got) != 1 || got[0].Device != "md0" || got[0].Missing != tt.want {
				t.Fatalf("arrays %+v: want md0 missing %d", got, tt.want)
			}
		})
	}
}
