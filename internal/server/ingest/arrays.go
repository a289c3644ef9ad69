package ingest

import (
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// arraysOf are the md arrays below a volume whose raid_disks the kernel
// stated (sysfs), with how many of those disks have no member device
// listed below the array: part of the judged record (inventory_arrays),
// shown as plumbline_volume_raid_missing_members. (md's own degraded count
// and member states are not in the geometry; see docs/runbooks.)
func arraysOf(v *plumblinev1.Volume) []store.RAIDArray {
	var out []store.RAIDArray
	for _, l := range v.GetLayers() {
		if vocab.LayerKind(l.GetKind()) != vocab.LayerRAID || vocab.Source(l.GetSources()["raid_disks"]) != vocab.SourceSysfs || l.GetRaidDisks() == 0 {
			continue
		}
		missing := int(l.GetRaidDisks()) - len(l.GetBelow())
		out = append(out, store.RAIDArray{Device: l.GetDevice(), Missing: max(missing, 0)})
	}
	return out
}
