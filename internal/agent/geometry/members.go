package geometry

import (
	"slices"
	"sort"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Member groups: the sets of sibling devices under the discovered volumes
// that do the same kind of work, so that one member's latency can be
// judged against the others' (Record.member_io). They are read from the
// layers discovery already made, never from the devices:
//
//   - md: an md array's member devices (its slaves), with each member's
//     dev-*/state. A linear array is left out (its members hold different
//     parts of the data and see different load), as is a declared hardware
//     array (the OS sees no members).
//   - md level multipath: the array's paths (kind multipath).
//   - lvm: the physical volumes under one striped LV.
//   - mirror: the legs of a mirrored LV (LVM raid1 or mirror segments: the
//     *_rimage_N or *_mimage_N sub-LVs, not their metadata sub-LVs). The
//     legs of LVM raid4/5/6/10 LVs are a group of kind lvm.
//   - multipath: a device-mapper multipath device's paths (dm uuid mpath-).
//
// A plain device-mapper device over several devices whose target sysfs
// does not state (its table needs an ioctl the agent does not make) is
// left out: a linear concatenation is no group of siblings.

// Bounds of the member groups an agent samples: a host with more groups, or
// a group with more members, has the rest left out (and counted), so that
// one Record.member_io stays small and within what the server accepts (at
// most MaxMembers members in all: ~80 KiB; a typical host sends well under
// 1 KiB).
const (
	MaxMemberGroups = 64
	MaxGroupMembers = 64
	MaxMembers      = 1024
)

// MemberGroup is one set of sibling devices under the volumes.
type MemberGroup struct {
	Device      string                // the device the members make up (md0, dm-3)
	Kind        vocab.MemberGroupKind // md, mirror, lvm, multipath
	MountPoints []string              // the volumes on it, sorted
	Members     []Member              // two or more, sorted by device
}

// MD says whether the group's members carry md state (kind md).
func (g MemberGroup) MD() bool { return g.Kind == vocab.MemberGroupMD }

// Member is one member of a group.
type Member struct {
	Device string   // kernel name as /proc/diskstats names it
	State  []string // md dev-*/state flags (md groups only)
	// Serial is the serial of the one disk under the member when the
	// layers name it (a partition's disk, a leg's disk); empty otherwise.
	Serial string
}

// MemberGroupsResult is MemberGroups' answer.
type MemberGroupsResult struct {
	Groups []MemberGroup // sorted by device, at most MaxMemberGroups
	// Dropped counts groups left out over MaxMemberGroups; Truncated the
	// groups whose members were cut to MaxGroupMembers.
	Dropped, Truncated int
}

// MemberGroups finds the member groups under vols. A device that lies
// under several volumes is one group listing every volume's mount point.
func MemberGroups(vols []*plumblinev1.Volume) MemberGroupsResult {
	byDev := map[string]*MemberGroup{}
	for _, v := range vols {
		layers := map[string]*plumblinev1.Layer{}
		for _, l := range v.GetLayers() {
			if _, ok := layers[l.GetDevice()]; !ok && l.GetKind() != KindFilesystem {
				layers[l.GetDevice()] = l
			}
		}
		for _, l := range v.GetLayers() {
			g, ok := groupOf(l, layers)
			if !ok {
				continue
			}
			if have, ok := byDev[g.Device]; ok {
				if !slices.Contains(have.MountPoints, v.GetMountPoint()) {
					have.MountPoints = append(have.MountPoints, v.GetMountPoint())
				}
				continue
			}
			g.MountPoints = []string{v.GetMountPoint()}
			byDev[g.Device] = &g
		}
	}
	var res MemberGroupsResult
	for _, g := range byDev {
		sort.Strings(g.MountPoints)
		if len(g.Members) > MaxGroupMembers {
			g.Members = g.Members[:MaxGroupMembers]
			res.Truncated++
		}
		res.Groups = append(res.Groups, *g)
	}
	sort.Slice(res.Groups, func(i, j int) bool { return res.Groups[i].Device < res.Groups[j].Device })
	total := 0
	for i, g := range res.Groups {
		if i == MaxMemberGroups || total+len(g.Members) > MaxMembers {
			res.Dropped = len(res.Groups) - i
			res.Groups = res.Groups[:i]
			break
		}
		total += len(g.Members)
	}
	return res
}

// groupOf is the member group layer l makes, if it makes one; layers are
// the volume's layers by device.
func groupOf(l *plumblinev1.Layer, layers map[string]*plumblinev1.Layer) (MemberGroup, bool) {
	if len(l.GetBelow()) < 2 {
		return MemberGroup{}, false
	}
	g := MemberGroup{Device: l.GetDevice()}
	below := l.GetBelow()
	switch l.GetKind() {
	case KindRAID:
		if l.GetSource() == SourceDeclared {
			return MemberGroup{}, false
		}
		switch l.GetRaidLevel() {
		case "linear", "faulty":
			return MemberGroup{}, false
		case "multipath":
			g.Kind = vocab.MemberGroupMultipath
		default:
			g.Kind = vocab.MemberGroupMD
		}
	case KindLVM:
		switch t := l.GetDmTarget(); {
		case t == "striped":
			g.Kind = vocab.MemberGroupLVM
		case t == "raid1" || t == "mirror":
			g.Kind, below = vocab.MemberGroupMirror, legs(below, layers)
		case strings.HasPrefix(t, "raid"):
			g.Kind, below = vocab.MemberGroupLVM, legs(below, layers)
		default:
			return MemberGroup{}, false
		}
	case KindDM:
		if !strings.HasPrefix(l.GetUuid(), "mpath-") {
			return MemberGroup{}, false
		}
		g.Kind = vocab.MemberGroupMultipath
	default:
		return MemberGroup{}, false
	}
	states := map[string][]string{} // md state: md groups only (an md multipath's paths have none on the wire)
	if g.Kind == vocab.MemberGroupMD {
		for _, m := range l.GetRaidHealth().GetMembers() {
			states[m.GetDevice()] = m.GetState()
		}
	}
	seen := map[string]bool{}
	for _, dev := range below {
		if dev == "" || seen[dev] {
			continue
		}
		seen[dev] = true
		g.Members = append(g.Members, Member{Device: dev, State: slices.Clone(states[dev]), Serial: diskSerial(dev, layers)})
	}
	if len(g.Members) < 2 {
		return MemberGroup{}, false
	}
	sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].Device < g.Members[j].Device })
	return g, true
}

// legs are the data legs among an LVM raid or mirror LV's sub-LVs (the
// *_rimage_N and *_mimage_N devices; the *_rmeta_N and *_mlog ones hold
// metadata). A sub-LV whose name is unknown is kept.
func legs(below []string, layers map[string]*plumblinev1.Layer) []string {
	var out []string
	for _, dev := range below {
		name := layers[dev].GetName()
		if name != "" && !strings.Contains(name, "_rimage_") && !strings.Contains(name, "_mimage_") {
			continue
		}
		out = append(out, dev)
	}
	return out
}

// diskSerial is the serial of the one disk under dev, following single
// devices down the layers (a partition to its disk, a leg to its PV's
// disk); empty when the chain forks or names none.
func diskSerial(dev string, layers map[string]*plumblinev1.Layer) string {
	for range maxMemberDepth {
		l, ok := layers[dev]
		if !ok {
			return ""
		}
		if l.GetKind() == KindDisk {
			return l.GetSerial()
		}
		if len(l.GetBelow()) != 1 {
			return ""
		}
		dev = l.GetBelow()[0]
	}
	return ""
}

// maxMemberDepth bounds how far diskSerial follows a member down its
// layers (discovery's chains are at most 16 deep on Linux).
const maxMemberDepth = 16
