package geometry

import (
	"fmt"
	"path/filepath"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// applyDeclared turns a whole disk the operator declared as a hardware
// array into a raid layer.
func (d *discoverer) applyDeclared(l *plumblinev1.Layer, decl DeclaredDevice) {
	applyDeclaredRAID(l, decl)
}

// resolveDeclared maps each declared device to the kernel name of a whole
// disk, warning about those that match nothing.
func (d *discoverer) resolveDeclared() {
	if len(d.opts.Declared) == 0 {
		return
	}
	d.blockDevs = d.blockDevices()
	for _, decl := range d.opts.Declared {
		if decl.Device == "" {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s: matching by serial or model is Windows-only; on Linux name the disk (device: /dev/disk/by-id/...)", declaredLabel(decl)))
			continue
		}
		name := d.declaredName(decl)
		if name == "" {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s matches no block device in %s", decl.Device, d.devBlockDir()))
			continue
		}
		if d.isPartition(d.blockDevs[name]) {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s (%s) is not a whole disk; declare the disk the array presents", decl.Device, name))
			continue
		}
		d.declared[name] = decl
	}
}

// declaredName is the kernel name of a declared device: /dev/sdb, a
// /dev/disk/by-id link resolved under DevRoot, or a bare kernel name; ""
// when it names no block device.
func (d *discoverer) declaredName(decl DeclaredDevice) string {
	known := func(n string) bool {
		_, ok := d.blockDevs[n]
		return ok
	}
	p := decl.Device
	if n, ok := d.devLinkName(p); ok && known(n) {
		return n
	}
	if n := filepath.Base(p); known(n) {
		return n
	}
	return ""
}
