package geometry

import (
	"fmt"
	"os"
	"path/filepath"
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
	if d.opts.LVMBackupDir == "" {
		return
	}
	ents, err := os.ReadDir(d.opts.LVMBackupDir)
	if err != nil {
		return
	}
	d.recDir(d.opts.LVMBackupDir)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(d.opts.LVMBackupDir, e.Name())
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
