package geometry

import (
	"fmt"
	"os"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

type lvmMatch struct {
	vg lvmVG
	lv lvmLV
}

// loadLVM reads every metadata backup once per discovery.
func (d *discoverer) loadLVM() {
	if d.lvmLoaded {
		return
	}
	d.lvmLoaded = true
	d.lvm = map[string]lvmMatch{}
	d.lvmVGErr = map[string]string{}
	if d.lvmBackup == "" {
		return
	}
	ents, err := os.ReadDir(string(d.lvmBackup))
	if err != nil {
		return
	}
	d.recDir(string(d.lvmBackup))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := d.lvmBackup.Path(e.Name())
		b, err := d.readFileLimit(p, lvmMaxBytes)
		if err != nil {
			d.lvmVGErr[e.Name()] = fmt.Sprintf("read %s: %v", p, err)
			continue
		}
		vgs, err := parseLVMMetadata(b)
		if err != nil {
			d.lvmVGErr[e.Name()] = fmt.Sprintf("%s: %v", p, err)
			continue
		}
		for _, vg := range vgs {
			for _, lv := range vg.LVs {
				d.lvm[lvmDMName(vg.Name, lv.Name)] = lvmMatch{vg: vg, lv: lv}
			}
		}
	}
}

// readLVM describes an LVM LV from its VG's metadata backup: the data
// offset on the PV and the first segment's target and stripes.
func (d *discoverer) readLVM(l *plumblinev1.Layer) {
	if l.Name == "" {
		addUnknown(l, "offset_bytes", "the dm name is unreadable, so the LV cannot be found in LVM metadata")
		return
	}
	d.loadLVM()
	match, ok := d.lvm[l.Name]
	if !ok {
		vg, _, _ := splitDMName(l.Name)
		reason := fmt.Sprintf("no LVM metadata backup for VG %s in %s", vg, d.lvmBackup)
		if why, bad := d.lvmVGErr[vg]; bad {
			reason = why
		}
		addUnknown(l, "offset_bytes", reason)
		addUnknown(l, "dm_target", reason)
		return
	}
	l.Source = SourceLVMMetadata
	off, err := match.vg.lvmDataOffset(match.lv)
	if err != nil {
		addUnknown(l, "offset_bytes", err.Error())
	} else {
		l.OffsetBytes = proto.Uint64(off)
		l.Sources["offset_bytes"] = SourceLVMMetadata
	}
	if len(match.lv.Segments) == 0 {
		addUnknown(l, "dm_target", "LV has no segments")
		return
	}
	seg := match.lv.Segments[0]
	switch {
	case seg.Type == "striped" && seg.StripeCount > 1:
		l.DmTarget = "striped"
		l.RaidLevel = "raid0"
		l.RaidDisks = uint32(seg.StripeCount)
		l.RaidDataDisks = uint32(seg.StripeCount)
		l.StripeUnitBytes = seg.StripeSize * lvmSectorBytes
		for _, f := range []string{"raid_level", "raid_disks", "raid_data_disks", "stripe_unit_bytes"} {
			l.Sources[f] = SourceLVMMetadata
		}
	case seg.Type == "striped":
		l.DmTarget = "linear"
	default:
		l.DmTarget = seg.Type
	}
	l.Sources["dm_target"] = SourceLVMMetadata
	if len(match.lv.Segments) > 1 {
		addUnknown(l, "dm_target", fmt.Sprintf("LV has %d segments; the first one is described", len(match.lv.Segments)))
	}
}
