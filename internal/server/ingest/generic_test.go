package ingest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The walk of checkGeneric before its paths were built lazily, kept as the
// reference its messages must match word for word.

// refCheckGeneric walks a message: every string at most MaxStringBytes, every
// list and map at most MaxListLen (volumes and layers have their own
// limits), every double finite.
func refCheckGeneric(m protoreflect.Message, where string, lim Limits, depth int) error {
	if depth > 16 {
		return fmt.Errorf("%s: nested too deep", where)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := where + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			max := lim.MaxListLen
			switch fd.FullName() {
			case "plumbline.v1.Inventory.volumes":
				max = lim.MaxVolumes
			case "plumbline.v1.Volume.layers":
				max = lim.MaxLayers
			case "plumbline.v1.Histogram.buckets":
				max = wire.MaxBuckets
			}
			if l.Len() > max {
				err = fmt.Errorf("%s: %d entries: want at most %d", name, l.Len(), max)
				return false
			}
			for i := 0; i < l.Len() && err == nil; i++ {
				err = refCheckValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", name, i), lim, depth)
			}
		case fd.IsMap():
			mp := v.Map()
			if mp.Len() > lim.MaxListLen {
				err = fmt.Errorf("%s: %d entries: want at most %d", name, mp.Len(), lim.MaxListLen)
				return false
			}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if s, ok := k.Interface().(string); ok && len(s) > lim.MaxStringBytes {
					err = fmt.Errorf("%s: key of %d bytes: want at most %d", name, len(s), lim.MaxStringBytes)
					return false
				}
				if s, ok := k.Interface().(string); ok && labels.CheckText(s) != nil {
					err = fmt.Errorf("%s: key of text %v", name, labels.CheckText(s))
					return false
				}
				err = refCheckValue(fd.MapValue(), mv, fmt.Sprintf("%s[%v]", name, k.Interface()), lim, depth)
				return err == nil
			})
		default:
			err = refCheckValue(fd, v, name, lim, depth)
		}
		return err == nil
	})
	return err
}

func refCheckValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, name string, lim Limits, depth int) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if n := len(v.String()); n > lim.MaxStringBytes {
			return fmt.Errorf("%s: %d bytes: want at most %d", name, n, lim.MaxStringBytes)
		}
		if err := labels.CheckText(v.String()); err != nil {
			return fmt.Errorf("%s: text %v", name, err)
		}
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %v: want a finite number", name, f)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return refCheckGeneric(v.Message(), name, lim, depth+1)
	}
	return nil
}

// genericCases are records each failing one check of checkGeneric (and
// good ones), at every kind of path segment: field, list index, map key,
// nested message.
func genericCases() map[string]*plumblinev1.Record {
	lim := DefaultLimits()
	long := strings.Repeat("x", lim.MaxStringBytes+1)
	cases := map[string]*plumblinev1.Record{
		"good probe":    probeRecord(1),
		"good geometry": geometryRecord(1, misalignedVolume("/data"), misalignedVolume("/log")),
	}
	mod := func(name string, r *plumblinev1.Record, f func(*plumblinev1.Record)) {
		f(r)
		cases[name] = r
	}
	mod("probe long device", probeRecord(2), func(r *plumblinev1.Record) { r.GetProbe().Device = long })
	mod("probe NaN busy", probeRecord(3), func(r *plumblinev1.Record) { r.GetProbe().BusyPercent = math.NaN() })
	mod("probe +Inf cap", probeRecord(4), func(r *plumblinev1.Record) { r.GetProbe().IopsCap = math.Inf(1) })
	mod("too many buckets", probeRecord(5), func(r *plumblinev1.Record) {
		h := r.GetProbe().GetLatency()
		for len(h.Buckets) <= wire.MaxBuckets {
			h.Buckets = append(h.Buckets, h.Buckets[0])
		}
	})
	mod("long layer device", geometryRecord(6, misalignedVolume("/data"), misalignedVolume("/log")), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[1].GetLayers()[1].Device = long
	})
	mod("too many layers", geometryRecord(7, misalignedVolume("/data")), func(r *plumblinev1.Record) {
		v := r.GetGeometry().GetInventory().GetVolumes()[0]
		for len(v.Layers) <= lim.MaxLayers {
			v.Layers = append(v.Layers, v.Layers[0])
		}
	})
	geo := func(seq uint64) *plumblinev1.Record {
		return geometryRecord(seq, misalignedVolume("/data"), misalignedVolume("/log"))
	}
	mod("long map key", geo(8), func(r *plumblinev1.Record) {
		v := r.GetGeometry().GetInventory().GetVolumes()[0]
		v.Filesystem = &plumblinev1.Filesystem{Type: "xfs", Sources: map[string]string{"ok": "sysfs", long: "x"}}
	})
	mod("long map value", geo(9), func(r *plumblinev1.Record) {
		l := r.GetGeometry().GetInventory().GetVolumes()[1].GetLayers()[0]
		l.Sources = map[string]string{"stripe_unit_bytes": long}
	})
	mod("too many map entries", geo(10), func(r *plumblinev1.Record) {
		l := r.GetGeometry().GetInventory().GetVolumes()[1].GetLayers()[0]
		l.Sources = map[string]string{}
		for i := range lim.MaxListLen + 1 {
			l.Sources[fmt.Sprint(i)] = "x"
		}
	})
	mod("NaN map value", geo(11), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[0].Alignment = &plumblinev1.Alignment{SplitFraction: map[uint32]float64{8192: math.NaN()}}
	})
	// Text that rewrites a terminal, CSV viewer or browser, in any
	// string field: a field added later is walked the same way.
	mod("ESC in a layer model", geo(13), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[0].GetLayers()[2].Model = "SSD\x1b[2J"
	})
	mod("CR LF in busy_guard", probeRecord(14), func(r *plumblinev1.Record) { r.GetProbe().BusyGuard = "unavailable: x\r\nFAKE" })
	mod("NUL in a layer model", geo(15), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[1].GetLayers()[0].Model = "a\x00b"
	})
	mod("bidi override in a device", probeRecord(16), func(r *plumblinev1.Record) { r.GetProbe().Device = "sd\u202eb" })
	mod("C1 control in a map key", geo(17), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[0].Filesystem = &plumblinev1.Filesystem{Type: "xfs", Sources: map[string]string{"a\u009b": "sysfs"}}
	})
	mod("bidi isolate in a map value", geo(18), func(r *plumblinev1.Record) {
		r.GetGeometry().GetInventory().GetVolumes()[1].GetLayers()[0].Sources = map[string]string{"x": "\u2066sysfs"}
	})
	nested := &plumblinev1.Record{Sequence: 12, Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{}}}
	cases["good empty geometry"] = nested
	return cases
}

// TestCheckGenericMessages: checkGeneric fails and passes exactly where the
// reference does, with the same message.
func TestCheckGenericMessages(t *testing.T) {
	t.Parallel()
	lim := DefaultLimits()
	for name, r := range genericCases() {
		t.Run(name, func(t *testing.T) {
			got := checkGeneric(r.ProtoReflect(), "record", lim, 0)
			want := refCheckGeneric(r.ProtoReflect(), "record", lim, 0)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("checkGeneric = %v, want %v", got, want)
			}
			if strings.HasPrefix(name, "good") != (got == nil) {
				t.Errorf("checkGeneric = %v, want an error only for a bad record", got)
			}
		})
	}
}

// FuzzCheckGeneric: on any decodable record, checkGeneric says what the
// reference says, word for word.
func FuzzCheckGeneric(f *testing.F) {
	for _, r := range genericCases() {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 64, 8)
	}
	f.Fuzz(func(t *testing.T, data []byte, maxString, maxList int) {
		var r plumblinev1.Record
		if err := proto.Unmarshal(data, &r); err != nil {
			return
		}
		lim := Limits{MaxStringBytes: maxString, MaxListLen: maxList, MaxVolumes: maxList, MaxLayers: maxList}.withDefaults()
		got := checkGeneric(r.ProtoReflect(), "record", lim, 0)
		want := refCheckGeneric(r.ProtoReflect(), "record", lim, 0)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("checkGeneric = %v, want %v", got, want)
		}
	})
}

// BenchmarkCheckGeneric compares the walk of a good record with the
// reference (which built every field's path).
func BenchmarkCheckGeneric(b *testing.B) {
	recs := []*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"), misalignedVolume("/log")), probeRecord(2)}
	for _, impl := range []struct {
		name string
		fn   func(protoreflect.Message, string, Limits, int) error
	}{{"lazy", checkGeneric}, {"reference", refCheckGeneric}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range recs {
					if err := impl.fn(r.ProtoReflect(), "record", DefaultLimits(), 0); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
