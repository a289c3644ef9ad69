// Package render turns Plumbline's messages into what people and scripts
// read: JSON in the protojson form (proto field names) and aligned tables.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// JSON marshals m in the protojson form with proto field names, indented,
// with one change: 64-bit integers are JSON numbers rather than strings, so
// that `"data_offset_bytes": 32256` compares as a number in jq and Python.
// Byte counts stay far below 2^53, where every JSON reader is exact, and
// protojson.Unmarshal accepts both forms, so the output still round-trips.
func JSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("re-read protojson: %w", err)
	}
	numberize(v, m.ProtoReflect().Descriptor())
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal json: %w", err)
	}
	return append(out, '\n'), nil
}

// numberize walks a decoded protojson object alongside its descriptor and
// turns quoted 64-bit integers into numbers.
func numberize(v any, md protoreflect.MessageDescriptor) {
	obj, ok := v.(map[string]any)
	if !ok {
		return // a well-known type rendered as a scalar (Timestamp, Duration)
	}
	for k, val := range obj {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := val.(map[string]any); ok {
				for mk, mv := range m {
					m[mk] = fieldValue(mv, fd.MapValue())
				}
			}
		case fd.IsList():
			if l, ok := val.([]any); ok {
				for i, e := range l {
					l[i] = fieldValue(e, fd)
				}
			}
		default:
			obj[k] = fieldValue(val, fd)
		}
	}
}

func fieldValue(v any, fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.Sint64Kind,
		protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		numberize(v, fd.Message())
	}
	return v
}
