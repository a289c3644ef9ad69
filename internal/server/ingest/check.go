package ingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/wire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// truncateUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "… (truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// discardUnknown drops the unknown fields of m and of every message in it.
func discardUnknown(m protoreflect.Message, depth int) {
	if depth > 64 {
		return // deeper than any Plumbline message; checkGeneric refuses it
	}
	if m.GetUnknown() != nil {
		m.SetUnknown(nil)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				discardUnknown(l.Get(i).Message(), depth+1)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				discardUnknown(mv.Message(), depth+1)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			discardUnknown(v.Message(), depth+1)
		}
		return true
	})
}

// checkGeneric walks a message: every string at most MaxStringBytes of
// printable text (labels.CheckText: no control or bidi characters), every
// list and map at most MaxListLen (volumes and layers have their own
// limits), every double finite. The walk is by reflection, so a field
// added to a message later is checked without being named here. An error names the field by its path from
// where ("record.probe.latency.buckets[3]: ...").
//
// The path is built only for an error, from the failing field outwards
// (fieldError.at): the walk of a good message, run for every field of
// every record received, builds no strings.
func checkGeneric(m protoreflect.Message, where string, lim Limits, depth int) error {
	if e := checkMessage(m, lim, depth); e != nil {
		return e.error(where)
	}
	return nil
}

// fieldError is a failed check of checkMessage: msg, and the path of the
// field that failed, innermost segment first.
type fieldError struct {
	rpath []string // ".name", "[3]", "[key]"
	msg   string
}

// at adds the next outer segment of the path.
func (e *fieldError) at(seg string) *fieldError {
	e.rpath = append(e.rpath, seg)
	return e
}

func (e *fieldError) error(root string) error {
	var b strings.Builder
	b.WriteString(root)
	for i := len(e.rpath) - 1; i >= 0; i-- {
		b.WriteString(e.rpath[i])
	}
	b.WriteString(": ")
	b.WriteString(e.msg)
	return errors.New(b.String())
}

func fieldErrorf(format string, args ...any) *fieldError {
	return &fieldError{msg: fmt.Sprintf(format, args...)}
}

func checkMessage(m protoreflect.Message, lim Limits, depth int) *fieldError {
	if depth > 16 {
		return &fieldError{msg: "nested too deep"}
	}
	var err *fieldError
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
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
				err = fieldErrorf("%d entries: want at most %d", l.Len(), max)
				break
			}
			for i := 0; i < l.Len() && checked(fd); i++ {
				if err = checkValue(fd, l.Get(i), lim, depth); err != nil {
					err.at("[" + strconv.Itoa(i) + "]")
					break
				}
			}
		case fd.IsMap():
			mp := v.Map()
			if mp.Len() > lim.MaxListLen {
				err = fieldErrorf("%d entries: want at most %d", mp.Len(), lim.MaxListLen)
				break
			}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if s, ok := k.Interface().(string); ok {
					if err = checkString(s, lim); err != nil {
						err.msg = "key of " + err.msg
						return false
					}
				}
				if err = checkValue(fd.MapValue(), mv, lim, depth); err != nil {
					err.at(fmt.Sprintf("[%v]", k.Interface()))
				}
				return err == nil
			})
		default:
			err = checkValue(fd, v, lim, depth)
		}
		if err != nil {
			err.at("." + string(fd.Name()))
		}
		return err == nil
	})
	return err
}

// checked reports whether checkValue checks anything of a value of fd's
// kind (integers, bools, bytes and enums have nothing to check).
func checked(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.DoubleKind, protoreflect.FloatKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return true
	}
	return false
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, lim Limits, depth int) *fieldError {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return checkString(v.String(), lim)
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fieldErrorf("%v: want a finite number", f)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message(), lim, depth+1)
	}
	return nil
}

// checkString: at most MaxStringBytes of printable text.
func checkString(s string, lim Limits) *fieldError {
	if n := len(s); n > lim.MaxStringBytes {
		return fieldErrorf("%d bytes: want at most %d", n, lim.MaxStringBytes)
	}
	if err := labels.CheckText(s); err != nil {
		return &fieldError{msg: "text " + err.Error()}
	}
	return nil
}
