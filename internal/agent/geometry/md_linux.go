package geometry

import (
	"fmt"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// readMD reads an md array's level, chunk, members and data offset.
func (d *discoverer) readMD(l *plumblinev1.Layer, dir root) {
	md := dir.Sub("md")
	level, err := d.readString(md.Path("level"))
	if err != nil {
		addUnknown(l, "raid_level", d.reason(md.Path("level"), err))
	} else {
		l.RaidLevel = level
		l.Sources["raid_level"] = SourceSysfs
	}
	disks, copies := d.readMDShape(l, md, level)
	if level != "" && disks > 0 {
		if n, err := mdDataDisks(level, disks, copies); err != nil {
			addUnknown(l, "raid_data_disks", err.Error())
		} else {
			l.RaidDataDisks = uint32(n)
			l.Sources["raid_data_disks"] = SourceSysfs
		}
	}
	d.readMDDataOffset(l, md)
	d.readMDHealth(l, md, level)
}

// readMDShape reads an md array's disks, chunk and layout, and the ones
// they replace while a reshape runs. It returns the member count and the
// copies the layout keeps of each chunk (0 when none is known), which give
// the data disks.
func (d *discoverer) readMDShape(l *plumblinev1.Layer, md root, level string) (disks, copies uint64) {
	// During a reshape raid_disks, chunk_size and layout read "new (old)":
	// the layer gets the new geometry, Layer.reshape the old one.
	var reshape plumblinev1.RaidReshape
	reshaping := d.mdReshaping(md)
	if v, prev, ok := d.readMDUint(l, "raid_disks", md.Path("raid_disks"), zeroUnknown); ok {
		disks = v
		l.RaidDisks = uint32(v)
		l.Sources["raid_disks"] = SourceSysfs
		if prev != v && prev != 0 {
			reshape.PreviousRaidDisks, reshaping = uint32(prev), true
		}
	}
	switch level {
	case "raid1", "linear", "multipath", "faulty":
		addUnknown(l, "stripe_unit_bytes", level+" has no chunk")
	default:
		if v, prev, ok := d.readMDUint(l, "stripe_unit_bytes", md.Path("chunk_size"), zeroUnknown); ok {
			l.StripeUnitBytes = v
			l.Sources["stripe_unit_bytes"] = SourceSysfs
			if prev != v && prev != 0 {
				reshape.PreviousStripeUnitBytes, reshaping = prev, true
			}
		}
	}
	if level == "raid10" || level == "raid5" || level == "raid6" {
		if n, prev, ok := d.readMDUint(l, "raid_layout", md.Path("layout"), zeroValue); ok {
			if desc, c, ok := mdLayout(level, n); ok {
				l.RaidLayout = desc
				l.Sources["raid_layout"] = SourceSysfs
				copies = c
			} else {
				addUnknown(l, "raid_layout", fmt.Sprintf("%s layout %d is not one this reader knows", level, n))
			}
			if prev != n {
				reshaping = true
				if desc, _, ok := mdLayout(level, prev); ok {
					reshape.PreviousRaidLayout = desc
				} else {
					reshape.PreviousRaidLayout = fmt.Sprintf("layout %d", prev)
				}
			}
		}
	}
	if reshaping {
		l.Reshape = &reshape
		l.Sources["reshape"] = SourceSysfs
	}
	return disks, copies
}

// readMDDataOffset reads the members' data offsets: md's data starts at
// each member's data offset; one offset for the layer when all members
// agree.
func (d *discoverer) readMDDataOffset(l *plumblinev1.Layer, md root) {
	// md's data starts at each member's data offset; one offset for the
	// layer when all members agree.
	var offs []uint64
	var why []string
	for _, m := range l.Below {
		p := md.Path("dev-"+m, "offset")
		b, err := d.readFile(p)
		var v uint64
		if err == nil {
			v, err = parseSysfsUint(b)
		}
		if err != nil {
			why = append(why, d.reason(p, err))
			continue
		}
		offs = append(offs, v)
	}
	switch {
	case len(why) > 0:
		addUnknown(l, "offset_bytes", strings.Join(why, "; "))
	case len(offs) == 0:
		addUnknown(l, "offset_bytes", "no member data offsets")
	default:
		for _, o := range offs[1:] {
			if o != offs[0] {
				addUnknown(l, "offset_bytes", fmt.Sprintf("members' data offsets differ: %v sectors", offs))
				return
			}
		}
		l.OffsetBytes = proto.Uint64(offs[0] * sectorBytes)
		l.Sources["offset_bytes"] = SourceSysfs
	}
}

// readMDUint reads an md attribute that holds one number, or "new (old)"
// during a reshape. It returns the new and the old value (old == new when
// there is only one) and records why when it cannot (a raid5 layout of 0
// is left-asymmetric: zeroValue). The caller records the source.
func (d *discoverer) readMDUint(l *plumblinev1.Layer, field, p string, zero zeroMeans) (cur, prev uint64, ok bool) {
	b, err := d.readFile(p)
	var pair bool
	if err == nil {
		cur, prev, pair, err = parseSysfsUintPair(b)
	}
	if err != nil {
		addUnknown(l, field, d.reason(p, err))
		return 0, 0, false
	}
	if !pair {
		prev = cur
	}
	if cur == 0 && zero == zeroUnknown {
		addUnknown(l, field, d.rel(p)+": the kernel reports 0 (no value)")
		return 0, 0, false
	}
	return cur, prev, true
}

// mdReshaping says whether md/reshape_position names a position (a reshape
// is running) rather than "none". Kernels without the file say nothing.
func (d *discoverer) mdReshaping(md root) bool {
	s, err := d.readString(md.Path("reshape_position"))
	if err != nil || s == "none" {
		return false
	}
	_, err = strconv.ParseUint(s, 10, 64)
	return err == nil
}
