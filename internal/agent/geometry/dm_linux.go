package geometry

import (
	"errors"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// readDM reads a device-mapper device: name, uuid, and for LVM the
// metadata backup.
func (d *discoverer) readDM(l *plumblinev1.Layer, dir root) {
	l.Kind = KindDM
	if s, err := d.readString(dir.Path("dm", "name")); err == nil {
		l.Name = s
		l.Sources["name"] = SourceSysfs
	} else {
		addUnknown(l, "name", d.reason(dir.Path("dm", "name"), err))
	}
	if s, err := d.readString(dir.Path("dm", "uuid")); err == nil {
		l.Uuid = s
		l.Sources["uuid"] = SourceSysfs
	} else if !errors.Is(err, errEmpty) {
		addUnknown(l, "uuid", d.reason(dir.Path("dm", "uuid"), err))
	}
	if !strings.HasPrefix(l.Uuid, "LVM-") {
		addUnknown(l, "offset_bytes", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		addUnknown(l, "dm_target", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		return
	}
	l.Kind = KindLVM
	d.readLVM(l)
}
