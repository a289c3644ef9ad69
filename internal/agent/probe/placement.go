package probe

import (
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// PlacementFor is where volume v's file system lies on the device a
// stripe-scan measures, from discovery's layers: on the striped device
// when a striped layer is visible (md, a striped LV, declared RAID), else
// on the disk (hardware RAID and SAN LUNs present themselves as one). nil
// v, or an offset on the way unknown: Known is false, Why says why.
func PlacementFor(v *plumblinev1.Volume) Placement {
	if v == nil {
		return Placement{Why: "no discovered volume holds the probe directory"}
	}
	if t := v.GetFilesystem().GetType(); t == "btrfs" || t == "zfs" {
		return Placement{Why: t + " maps files in its own address space: its extent offsets are not device offsets"}
	}
	a := align.Evaluate(v)
	switch {
	case a.StripeUnitBytes != 0 && a.DataOffsetBytes != nil:
		return Placement{Offset: int64(*a.DataOffsetBytes), Known: true, Device: a.GetStripedDevice(), Basis: align.BasisStripedDevice}
	case a.StripeUnitBytes == 0 && a.DiskOffsetBytes != nil:
		return Placement{Offset: int64(*a.DiskOffsetBytes), Known: true, Device: diskOf(v), Basis: align.BasisDisk}
	}
	why := "an offset between the file system and the device below it is unknown"
	for _, f := range a.GetFindings() {
		if f.GetRule() == align.RuleOffsetUnknown {
			why = f.GetMessage()
		}
	}
	return Placement{Why: why}
}

// diskOf is the device of the volume's bottom disk layer.
func diskOf(v *plumblinev1.Volume) string {
	ls := v.GetLayers()
	for i := len(ls) - 1; i >= 0; i-- {
		if vocab.LayerKind(ls[i].GetKind()) == vocab.LayerDisk {
			return ls[i].GetDevice()
		}
	}
	return ""
}
