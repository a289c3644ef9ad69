package geometry

import (
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/agentkeys"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// applyDeclaredRAID turns a whole disk the operator declared as a hardware
// array into a raid layer (Linux and Windows alike).
func applyDeclaredRAID(l *plumblinev1.Layer, decl DeclaredDevice) {
	l.Kind = KindRAID
	l.Source = SourceDeclared
	r := decl.RAID
	if !setKnown(l, "raid_level", &l.RaidLevel, r.Level, SourceDeclared) {
		addUnknown(l, "raid_level", "not declared")
	}
	if r.StripeUnit > 0 {
		l.StripeUnitBytes = uint64(r.StripeUnit)
		l.Sources["stripe_unit_bytes"] = SourceDeclared
	} else {
		addUnknown(l, "stripe_unit_bytes", "not declared")
	}
	if r.Disks > 0 {
		l.RaidDisks = r.Disks
		l.Sources["raid_disks"] = SourceDeclared
		if n, err := declaredDataDisks(r.Level, r.Disks, r.Spans); err != nil {
			addUnknown(l, "raid_data_disks", err.Error())
		} else {
			l.RaidDataDisks = n
			l.Sources["raid_data_disks"] = SourceDeclared
		}
	} else {
		addUnknown(l, "raid_disks", "not declared")
	}
}

// windowsDisk is what a Windows declared device is matched against.
type windowsDisk struct {
	Number uint32
	Serial string
	Model  string
}

// physicalDriveName is the layer device name of Windows disk n.
func physicalDriveName(n uint32) string { return "PhysicalDrive" + strconv.FormatUint(uint64(n), 10) }

// matchesWindowsDisk says whether decl names disk d: every key given
// (device, serial, model) must match; serial and model compare without
// case and surrounding blanks, as controllers pad them.
func (decl DeclaredDevice) matchesWindowsDisk(d windowsDisk) bool {
	if decl.Device == "" && decl.Serial == "" && decl.Model == "" {
		return false
	}
	if decl.Device != "" {
		n, ok := agentkeys.ParsePhysicalDrive(decl.Device)
		if !ok || n != d.Number {
			return false
		}
	}
	if decl.Serial != "" && !strings.EqualFold(strings.TrimSpace(decl.Serial), strings.TrimSpace(d.Serial)) {
		return false
	}
	if decl.Model != "" && !strings.EqualFold(strings.TrimSpace(decl.Model), strings.TrimSpace(d.Model)) {
		return false
	}
	return true
}

// declaredLabel names a declared device in warnings.
func declaredLabel(decl DeclaredDevice) string {
	var parts []string
	if decl.Device != "" {
		parts = append(parts, decl.Device)
	}
	if decl.Serial != "" {
		parts = append(parts, "serial "+strconv.Quote(decl.Serial))
	}
	if decl.Model != "" {
		parts = append(parts, "model "+strconv.Quote(decl.Model))
	}
	if len(parts) == 0 {
		return "(unnamed)"
	}
	return strings.Join(parts, ", ")
}

// setKnown sets a field of l (dst, named field on the wire) to v and
// records source as its provenance, unless v is the zero value: the reader
// does not know it. A value and its source are written together. It
// reports whether it set the field.
func setKnown[T comparable](l *plumblinev1.Layer, field string, dst *T, v T, source string) bool {
	var zero T
	if v == zero {
		return false
	}
	*dst = v
	l.Sources[field] = source
	return true
}

func addUnknown(l *plumblinev1.Layer, field, reason string) {
	l.Unknown = append(l.Unknown, &plumblinev1.Unknown{Field: field, Reason: reason})
}

func hasUnknown(l *plumblinev1.Layer, field string) bool {
	for _, u := range l.Unknown {
		if u.Field == field {
			return true
		}
	}
	return false
}
