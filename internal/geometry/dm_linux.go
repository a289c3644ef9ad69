package geometry

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// readDM reads a device-mapper device: name, uuid, and for LVM the
// metadata backup.
func (d *discoverer) readDM(l *plumblinev1.Layer, dir string) {
	l.Kind = KindDM
	if s, err := d.readString(filepath.Join(dir, "dm", "name")); err == nil {
		l.Name = s
		l.Sources["name"] = SourceSysfs
	} else {
		addUnknown(l, "name", d.reason(filepath.Join(dir, "dm", "name"), err))
	}
	if s, err := d.readString(filepath.Join(dir, "dm", "uuid")); err == nil {
		l.Uuid = s
		l.Sources["uuid"] = SourceSysfs
	} else if !errors.Is(err, errEmpty) {
		addUnknown(l, "uuid", d.reason(filepath.Join(dir, "dm", "uuid"), err))
	}
	if !strings.HasPrefix(l.Uuid, "LVM-") {
		addUnknown(l, "offset_bytes", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		addUnknown(l, "dm_target", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		return
	}
	l.Kind = KindLVM
	if l.Name == "" {
		addUnknown(l, "offset_bytes", "the dm name is unreadable, so the LV cannot be found in LVM metadata")
		return
	}
	d.loadLVM()
	match, ok := d.lvm[l.Name]
	if !ok {
		vg, _, _ := splitDMName(l.Name)
		reason := fmt.Sprintf("no LVM metadata backup for VG %s in %s", vg, d.opts.LVMBackupDir)
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
