package geometry

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// spacesVirtualDisk is one MSFT_VirtualDisk row with the Number of the
// MSFT_Disk it surfaces as (joinVirtualDisks). Field names are the WMI
// property names; the JSON form is the fixtures' spaces.json.
type spacesVirtualDisk struct {
	DiskNumber             *uint32 `json:"DiskNumber"`
	FriendlyName           string  `json:"FriendlyName"`
	UniqueID               string  `json:"UniqueId"`
	ResiliencySettingName  string  `json:"ResiliencySettingName"` // Simple, Mirror, Parity
	NumberOfColumns        uint32  `json:"NumberOfColumns"`
	NumberOfDataCopies     uint32  `json:"NumberOfDataCopies"`
	PhysicalDiskRedundancy uint32  `json:"PhysicalDiskRedundancy"`
	Interleave             uint64  `json:"Interleave"` // bytes
	LogicalSectorSize      uint64  `json:"LogicalSectorSize"`
	PhysicalSectorSize     uint64  `json:"PhysicalSectorSize"`
	Size                   uint64  `json:"Size"`
}

// decodeVirtualDisksJSON decodes spaces.json: one object or an array of
// them.
func decodeVirtualDisksJSON(b []byte) ([]spacesVirtualDisk, error) {
	t := strings.TrimSpace(string(b))
	if t == "" || t == "null" {
		return nil, nil
	}
	var rows []spacesVirtualDisk
	if strings.HasPrefix(t, "{") {
		var one spacesVirtualDisk
		if err := json.Unmarshal([]byte(t), &one); err != nil {
			return nil, fmt.Errorf("MSFT_VirtualDisk rows: %w", err)
		}
		rows = []spacesVirtualDisk{one}
	} else if err := json.Unmarshal([]byte(t), &rows); err != nil {
		return nil, fmt.Errorf("MSFT_VirtualDisk rows: %w", err)
	}
	return rows, nil
}

// msftVirtualDisk is the part of an MSFT_VirtualDisk instance read.
type msftVirtualDisk struct {
	ObjectId               string
	FriendlyName           string
	UniqueId               string
	ResiliencySettingName  string
	NumberOfColumns        uint16
	NumberOfDataCopies     uint16
	PhysicalDiskRedundancy uint16
	Interleave             uint64
	LogicalSectorSize      uint64
	PhysicalSectorSize     uint64
	Size                   uint64
}

// msftDisk is the part of an MSFT_Disk instance read.
type msftDisk struct {
	ObjectId     string
	Number       *uint32
	UniqueId     string
	SerialNumber string
}

// msftVirtualDiskToDisk is an MSFT_VirtualDiskToDisk association
// instance: two WMI object paths (REF properties).
type msftVirtualDiskToDisk struct {
	VirtualDisk string
	Disk        string
}

// joinVirtualDisks gives each virtual disk the Number of the disk it
// surfaces as: through the MSFT_VirtualDiskToDisk association when links
// has a row for it (matched on the ObjectId keys of the two object
// paths), else through the identifier Windows gives the surfaced disk
// (the virtual disk's UniqueId as MSFT_Disk's UniqueId or SerialNumber,
// compared without case, dashes or braces). A virtual disk that surfaces
// as no disk (detached) keeps a nil DiskNumber.
func joinVirtualDisks(vds []msftVirtualDisk, disks []msftDisk, links []msftVirtualDiskToDisk) []spacesVirtualDisk {
	byObject := map[string]*uint32{}
	byID := map[string]*uint32{}
	for _, d := range disks {
		if d.Number == nil {
			continue
		}
		if d.ObjectId != "" {
			byObject[d.ObjectId] = d.Number
		}
		for _, id := range []string{d.UniqueId, d.SerialNumber} {
			if k := normalizeStorageID(id); k != "" {
				if _, dup := byID[k]; !dup {
					byID[k] = d.Number
				}
			}
		}
	}
	linked := map[string]*uint32{}
	for _, l := range links {
		vd, ok1 := objectPathKey(l.VirtualDisk, "ObjectId")
		disk, ok2 := objectPathKey(l.Disk, "ObjectId")
		if !ok1 || !ok2 {
			continue
		}
		if n, ok := byObject[disk]; ok {
			linked[vd] = n
		}
	}
	out := make([]spacesVirtualDisk, 0, len(vds))
	for _, vd := range vds {
		row := spacesVirtualDisk{
			FriendlyName:           vd.FriendlyName,
			UniqueID:               vd.UniqueId,
			ResiliencySettingName:  vd.ResiliencySettingName,
			NumberOfColumns:        uint32(vd.NumberOfColumns),
			NumberOfDataCopies:     uint32(vd.NumberOfDataCopies),
			PhysicalDiskRedundancy: uint32(vd.PhysicalDiskRedundancy),
			Interleave:             vd.Interleave,
			LogicalSectorSize:      vd.LogicalSectorSize,
			PhysicalSectorSize:     vd.PhysicalSectorSize,
			Size:                   vd.Size,
		}
		if n, ok := linked[vd.ObjectId]; ok && vd.ObjectId != "" {
			row.DiskNumber = proto.Uint32(*n)
		} else if n, ok := byID[normalizeStorageID(vd.UniqueId)]; ok && vd.UniqueId != "" {
			row.DiskNumber = proto.Uint32(*n)
		}
		out = append(out, row)
	}
	return out
}

// normalizeStorageID folds the spellings of one identifier: case, and the
// dashes and braces of a GUID.
func normalizeStorageID(s string) string {
	return strings.ToUpper(strings.NewReplacer("-", "", "{", "", "}", "", " ", "").Replace(s))
}

// objectPathKey returns the value of key in a WMI object path such as
// \\HOST\root\Microsoft\Windows\Storage:MSFT_Disk.ObjectId="{1}\\\\HOST\\..."
// (the value is a quoted string in which backslash escapes the next
// character).
func objectPathKey(p, key string) (string, bool) {
	i := strings.Index(p, "."+key+`="`)
	if i < 0 {
		i = strings.Index(p, ","+key+`="`)
	}
	if i < 0 {
		return "", false
	}
	var b strings.Builder
	for j := i + len(key) + 3; j < len(p); j++ {
		switch c := p[j]; c {
		case '\\':
			j++
			if j == len(p) {
				return "", false
			}
			b.WriteByte(p[j])
		case '"':
			return b.String(), true
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// spacesLayout is the RAID geometry a virtual disk's resiliency, columns
// and interleave amount to.
func (vd spacesVirtualDisk) layout() (level string, unit uint64, disks, dataDisks uint32, err error) {
	cols := vd.NumberOfColumns
	if cols == 0 {
		return "", 0, 0, 0, fmt.Errorf("virtual disk %q reports 0 columns", vd.FriendlyName)
	}
	copies := max(vd.NumberOfDataCopies, 1)
	switch strings.ToLower(vd.ResiliencySettingName) {
	case "simple":
		if cols == 1 {
			return "linear", 0, 1, 1, nil
		}
		return "raid0", vd.Interleave, cols, cols, nil
	case "mirror":
		if cols == 1 {
			return "raid1", 0, copies, 1, nil
		}
		return "raid10", vd.Interleave, cols * copies, cols, nil
	case "parity":
		red := max(vd.PhysicalDiskRedundancy, 1)
		if cols <= red {
			return "", 0, 0, 0, fmt.Errorf("virtual disk %q: parity with %d columns and redundancy %d", vd.FriendlyName, cols, red)
		}
		level = "raid5"
		if red == 2 {
			level = "raid6"
		}
		return level, vd.Interleave, cols, cols - red, nil
	}
	return "", 0, 0, 0, fmt.Errorf("virtual disk %q: resiliency %q is not one this reader knows", vd.FriendlyName, vd.ResiliencySettingName)
}

// applySpaces turns a disk that is a Storage Spaces virtual disk into a
// raid layer with the virtual disk's columns and interleave.
func (d *winDiscoverer) applySpaces(ctx context.Context, l *plumblinev1.Layer, n uint32) {
	if !d.spacesLoaded {
		d.spacesLoaded = true
		d.spaces, d.spacesErr = d.src.virtualDisks(ctx)
	}
	l.Kind = KindRAID
	if d.spacesErr != nil {
		addUnknown(l, "stripe_unit_bytes", "Storage Spaces virtual disk; MSFT_VirtualDisk: "+d.spacesErr.Error())
		return
	}
	var vd *spacesVirtualDisk
	for i := range d.spaces {
		if p := d.spaces[i].DiskNumber; p != nil && *p == n {
			vd = &d.spaces[i]
			break
		}
	}
	if vd == nil {
		addUnknown(l, "stripe_unit_bytes", "Storage Spaces virtual disk, but no MSFT_VirtualDisk row surfaces as disk "+strconv.FormatUint(uint64(n), 10))
		return
	}
	l.Source = SourceWMI
	l.Name = vd.FriendlyName
	l.Sources["name"] = SourceWMI
	setKnown(l, "uuid", &l.Uuid, vd.UniqueID, SourceWMI)
	level, unit, disks, data, err := vd.layout()
	if err != nil {
		addUnknown(l, "raid_level", err.Error())
		return
	}
	l.RaidLevel, l.RaidDisks, l.RaidDataDisks = level, disks, data
	l.RaidLayout = fmt.Sprintf("%s, %d columns, %d copies, interleave %d", vd.ResiliencySettingName, vd.NumberOfColumns, max(vd.NumberOfDataCopies, 1), vd.Interleave)
	for _, f := range []string{"raid_level", "raid_disks", "raid_data_disks", "raid_layout"} {
		l.Sources[f] = SourceWMI
	}
	setKnown(l, "stripe_unit_bytes", &l.StripeUnitBytes, unit, SourceWMI)
	addUnknown(l, "below", "the pool's physical disks are not listed")
}
