package geometry

import (
	"context"
	"fmt"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// inheritSectors copies the disk's sector sizes to a layer on it, as the
// Linux partition layer reads its parent's queue.
func inheritSectors(l, disk *plumblinev1.Layer) {
	for _, f := range []struct {
		name string
		v    uint32
		set  func(uint32)
	}{
		{"logical_sector_bytes", disk.LogicalSectorBytes, func(x uint32) { l.LogicalSectorBytes = x }},
		{"physical_sector_bytes", disk.PhysicalSectorBytes, func(x uint32) { l.PhysicalSectorBytes = x }},
	} {
		if f.v != 0 {
			f.set(f.v)
			l.Sources[f.name] = disk.Sources[f.name]
		} else {
			addUnknown(l, f.name, "unknown on "+disk.Device)
		}
	}
}

// disk reads \\.\PhysicalDrive<n> once per discovery and returns a copy
// of its layer.
func (d *winDiscoverer) disk(ctx context.Context, n uint32) *plumblinev1.Layer {
	if l, ok := d.disks[n]; ok {
		d.markDeclared(n, l)
		return proto.Clone(l).(*plumblinev1.Layer)
	}
	l := &plumblinev1.Layer{Kind: KindDisk, Device: physicalDriveName(n), Source: SourceIoctl, Sources: map[string]string{}}
	geo := d.readDriveGeometry(l, n)
	d.readAccessAlignment(l, n, geo)
	addUnknown(l, "min_io_bytes", "Windows reports no I/O size hints")
	addUnknown(l, "opt_io_bytes", "Windows reports no I/O size hints")
	d.readSeekPenalty(l, n)
	desc, descErr := d.readDeviceDescriptor(l, n)
	if !d.applyDeclaredDisk(l, n) && descErr == nil && desc.BusType == busTypeSpaces {
		d.applySpaces(ctx, l, n)
	}
	d.disks[n] = proto.Clone(l).(*plumblinev1.Layer)
	return l
}

// queryProperty sends IOCTL_STORAGE_QUERY_PROPERTY for property id to
// disk n.
func (d *winDiscoverer) queryProperty(n, id uint32) ([]byte, error) {
	return d.src.diskIoctl(n, ioctlStorageQueryProperty, encodeStoragePropertyQuery(id))
}

// readDriveGeometry sets the disk's size from IOCTL_DISK_GET_DRIVE_GEOMETRY_EX
// and returns the geometry (zero when unreadable).
func (d *winDiscoverer) readDriveGeometry(l *plumblinev1.Layer, n uint32) driveGeometry {
	var geo driveGeometry
	b, err := d.src.diskIoctl(n, ioctlDiskGetDriveGeometryEx, nil)
	if err == nil {
		geo, err = decodeDriveGeometryEx(b)
	}
	if err != nil {
		addUnknown(l, "size_bytes", ioctlName(ioctlDiskGetDriveGeometryEx)+": "+err.Error())
	} else {
		l.SizeBytes = geo.DiskSize
		l.Sources["size_bytes"] = SourceIoctl
	}
	return geo
}

// readAccessAlignment sets the sector sizes and alignment offset from
// StorageAccessAlignmentProperty; without it the logical sector comes from
// the drive geometry.
func (d *winDiscoverer) readAccessAlignment(l *plumblinev1.Layer, n uint32, geo driveGeometry) {
	b, err := d.queryProperty(n, storageAccessAlignmentProperty)
	var al accessAlignment
	if err == nil {
		al, err = decodeAccessAlignment(b)
	}
	if err != nil {
		why := "IOCTL_STORAGE_QUERY_PROPERTY(StorageAccessAlignmentProperty): " + err.Error()
		if validSector(geo.BytesPerSector) {
			l.LogicalSectorBytes = geo.BytesPerSector
			l.Sources["logical_sector_bytes"] = SourceIoctl
		} else {
			addUnknown(l, "logical_sector_bytes", why)
		}
		addUnknown(l, "physical_sector_bytes", why)
		addUnknown(l, "alignment_offset_bytes", why)
	} else {
		l.LogicalSectorBytes = al.BytesPerLogicalSector
		l.PhysicalSectorBytes = al.BytesPerPhysicalSector
		l.AlignmentOffsetBytes = proto.Int64(int64(al.BytesOffsetForSectorAlignment))
		for _, f := range []string{"logical_sector_bytes", "physical_sector_bytes", "alignment_offset_bytes"} {
			l.Sources[f] = SourceIoctl
		}
	}
}

// readSeekPenalty sets rotational from StorageDeviceSeekPenaltyProperty.
func (d *winDiscoverer) readSeekPenalty(l *plumblinev1.Layer, n uint32) {
	b, err := d.queryProperty(n, storageDeviceSeekPenaltyProperty)
	var seek bool
	if err == nil {
		seek, err = decodeSeekPenalty(b)
	}
	if err != nil {
		addUnknown(l, "rotational", "IOCTL_STORAGE_QUERY_PROPERTY(StorageDeviceSeekPenaltyProperty): "+err.Error())
	} else {
		l.Rotational = proto.Bool(seek)
		l.Sources["rotational"] = SourceIoctl
	}
}

// readDeviceDescriptor sets model and serial from StorageDeviceProperty
// and returns the descriptor, or why it could not be read.
func (d *winDiscoverer) readDeviceDescriptor(l *plumblinev1.Layer, n uint32) (deviceDescriptor, error) {
	b, err := d.queryProperty(n, storageDeviceProperty)
	var desc deviceDescriptor
	if err == nil {
		desc, err = decodeDeviceDescriptor(b)
	}
	if err != nil {
		why := "IOCTL_STORAGE_QUERY_PROPERTY(StorageDeviceProperty): " + err.Error()
		addUnknown(l, "model", why)
		addUnknown(l, "serial", why)
	} else {
		if !setKnown(l, "model", &l.Model, desc.model(), SourceIoctl) {
			addUnknown(l, "model", "the device reports no product id")
		}
		if !setKnown(l, "serial", &l.Serial, desc.Serial, SourceIoctl) {
			addUnknown(l, "serial", "the device reports no serial number")
		}
	}
	return desc, err
}

// applyDeclaredDisk applies the first declared device that matches disk n
// (by number, serial or model), warns about later ones, and says whether
// one matched.
func (d *winDiscoverer) applyDeclaredDisk(l *plumblinev1.Layer, n uint32) bool {
	declared := false
	for i, decl := range d.opts.Declared {
		if decl.matchesWindowsDisk(windowsDisk{Number: n, Serial: l.Serial, Model: l.Model}) {
			if declared {
				d.warnings = append(d.warnings, fmt.Sprintf("declared device %s also matches %s, which an earlier entry already declared; ignored", declaredLabel(decl), l.Device))
				continue
			}
			applyDeclaredRAID(l, decl)
			d.declaredUsed[i] = true
			declared = true
		}
	}
	return declared
}

func (d *winDiscoverer) markDeclared(n uint32, l *plumblinev1.Layer) {
	if l.Source != SourceDeclared {
		return
	}
	for i, decl := range d.opts.Declared {
		if decl.matchesWindowsDisk(windowsDisk{Number: n, Serial: l.Serial, Model: l.Model}) {
			d.declaredUsed[i] = true
			return
		}
	}
}
