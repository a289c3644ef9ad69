package exporter

import (
	"bytes"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
)

// series is one metric of a family, encoded once in both formats: its text
// lines and its io.prometheus.client.Metric message. key is its label
// values in label-name order joined by NUL: comparing keys orders series as
// the client library's registry does (no label value holds a NUL; mount
// points and host names cannot).
type series struct {
	fam   int
	key   string
	text  []byte
	pb    []byte
	owner *part  // the volume part that last emitted it (nil: family-wide)
	gen   uint64 // the refresh that last emitted it
	dead  bool
}

// part is what one volume contributes to the per-volume families, from one
// source (its geometry, or its baselines): rebuilt only when its inputs
// change.
type part struct {
	series []*series
	hash   uint64 // shardHash of the volume's key: which shards carry it
}

// famState is one family's series in exposition order, kept up to date
// as series come and go; changes are noted in log.
type famState struct {
	byKey   map[string]*series
	order   []*series // by key
	added   []*series // not yet in order
	removed bool      // order holds dead series
	log     *changeLog
}

// put makes s (emitted by owner in refresh gen) the family's series of its
// key, keeping the existing one in place when the key is known; it
// returns the series the family holds.
func (fs *famState) put(s *series, owner *part, gen uint64) *series {
	if fs.byKey == nil {
		fs.byKey = map[string]*series{}
	}
	if old := fs.byKey[s.key]; old != nil {
		fs.replaceBytes(old, s)
		if old.owner != owner { // another volume's now (hosts sharing a name): it may move shards
			fs.log.note(old.owner)
			fs.log.note(owner)
		}
		old.owner, old.gen = owner, gen
		return old
	}
	s.owner, s.gen = owner, gen
	fs.byKey[s.key] = s
	fs.added = append(fs.added, s)
	fs.log.note(owner)
	return s
}

// replaceBytes gives old, a series of the family, the encodings of s (of
// the same key).
func (fs *famState) replaceBytes(old, s *series) {
	if !bytes.Equal(old.text, s.text) || !bytes.Equal(old.pb, s.pb) {
		old.text, old.pb = s.text, s.pb
		fs.log.note(old.owner)
	}
}

func (fs *famState) drop(s *series) {
	delete(fs.byKey, s.key)
	s.dead, fs.removed = true, true
	fs.log.note(s.owner)
}

// replace makes ss (any order) the family's only series.
func (fs *famState) replace(ss []*series, gen uint64) {
	for _, s := range ss {
		fs.put(s, nil, gen)
	}
	for _, s := range fs.order {
		if s.gen != gen {
			fs.drop(s)
		}
	}
	for _, s := range fs.added {
		if !s.dead && s.gen != gen {
			fs.drop(s)
		}
	}
}

// reset drops every series.
func (fs *famState) reset() {
	if len(fs.byKey) > 0 || len(fs.order) > 0 {
		fs.log.global = true
		*fs = famState{log: fs.log}
	}
}

// update brings the order up to date.
func (fs *famState) update() {
	if len(fs.added) == 0 && !fs.removed {
		return
	}
	order := fs.order
	if fs.removed {
		order = make([]*series, 0, len(fs.order)+len(fs.added))
		for _, s := range fs.order {
			if !s.dead {
				order = append(order, s)
			}
		}
	}
	added := fs.added[:0]
	for _, s := range fs.added {
		if !s.dead {
			added = append(added, s)
		}
	}
	slices.SortFunc(added, func(a, b *series) int { return strings.Compare(a.key, b.key) })
	fs.order = mergeSeries(order, added)
	fs.added, fs.removed = nil, false
}

// selected is the family's series in a shard, in order.
func (fs *famState) selected(sel shardSel) []*series {
	if sel == allShards {
		return fs.order
	}
	var out []*series
	for _, s := range fs.order {
		if s.owner == nil && sel.hasGlobal() || s.owner != nil && sel.has(s.owner.hash) {
			out = append(out, s)
		}
	}
	return out
}

// size is the length of the text or delimited protobuf encoding of ss, series of
// the family (0: absent), and pbSize that of its MetricFamily message.
func (f *family) size(ss []*series, protobuf bool) (n, pbSize int) {
	if len(ss) == 0 {
		return 0, 0
	}
	if !protobuf {
		n = len(f.textHeader)
		for _, s := range ss {
			n += len(s.text)
		}
		return n, 0
	}
	pbSize = len(f.pbHeader)
	for _, s := range ss {
		pbSize += protowire.SizeTag(4) + protowire.SizeBytes(len(s.pb))
	}
	return protowire.SizeVarint(uint64(pbSize)) + pbSize, pbSize
}

// appendTo appends the text or delimited protobuf encoding of ss, series
// of the family.
func (f *family) appendTo(b []byte, ss []*series, protobuf bool) []byte {
	if len(ss) == 0 {
		return b
	}
	if !protobuf {
		b = append(b, f.textHeader...)
		for _, s := range ss {
			b = append(b, s.text...)
		}
		return b
	}
	_, size := f.size(ss, true)
	b = protowire.AppendVarint(b, uint64(size))
	b = append(b, f.pbHeader...)
	for _, s := range ss {
		b = protowire.AppendTag(b, 4, protowire.BytesType) // MetricFamily.metric
		b = protowire.AppendBytes(b, s.pb)
	}
	return b
}

// mergeSeries merges two slices sorted by key; a is reused when b is empty.
func mergeSeries(a, b []*series) []*series {
	if len(b) == 0 {
		return a
	}
	out := make([]*series, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].key < b[0].key {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// key is the series' sort key: its label values in name order, NUL-joined.
func (f *family) key(values []string) string {
	var k strings.Builder
	n := 0
	for _, j := range f.order {
		n += len(values[j]) + 1
	}
	k.Grow(n)
	for i, j := range f.order {
		if i > 0 {
			k.WriteByte(0)
		}
		k.WriteString(values[j])
	}
	return k.String()
}

// encodeSeries encodes one gauge or counter of family f; values are its
// label values in the family's declared order.
func (f *family) encodeSeries(fam int, values []string, v float64) *series {
	s := &series{fam: fam, key: f.key(values)}
	buf := make([]byte, 0, f.lineSize(values)+f.metricSize(values))
	buf = f.appendLine(buf, "", values, math.NaN(), v)
	s.text = buf[:len(buf):len(buf)]
	s.pb = f.appendMetric(buf[len(buf):], values, v)
	return s
}

// lineSize is about the length of a gauge's or counter's line (the value
// at most 24 bytes; escapes are rare).
func (f *family) lineSize(values []string) int {
	n := len(f.name) + 2 + 24
	for i, j := range f.order {
		n += len(f.labelNames[i]) + 4 + len(values[j])
	}
	return n
}

// metricSize is the length of a gauge's or counter's Metric message.
func (f *family) metricSize(values []string) int {
	n := 0
	for i, j := range f.order {
		lp := protowire.SizeTag(1) + protowire.SizeBytes(len(f.labelNames[i])) + protowire.SizeTag(2) + protowire.SizeBytes(len(values[j]))
		n += protowire.SizeTag(1) + protowire.SizeBytes(lp)
	}
	return n + protowire.SizeTag(2) + protowire.SizeBytes(protowire.SizeTag(1)+protowire.SizeFixed64())
}

// appendLine appends one sample line in the text format, as expfmt writes
// it; le is the bucket bound, NaN for none.
func (f *family) appendLine(b []byte, suffix string, values []string, le, v float64) []byte {
	b = append(b, f.name...)
	b = append(b, suffix...)
	withLE := !math.IsNaN(le)
	if len(values) > 0 || withLE {
		sep := byte('{')
		for i, j := range f.order {
			b = append(b, sep)
			b = append(b, f.labelNames[i]...)
			b = append(b, `="`...)
			b = appendEscaped(b, values[j], true)
			b = append(b, '"')
			sep = ','
		}
		if withLE {
			b = append(b, sep)
			b = append(b, `le="`...)
			b = appendFloat(b, le)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// appendMetric appends a gauge's or counter's Metric message (labels,
// then the value), field by field as proto.Marshal writes it.
func (f *family) appendMetric(b []byte, values []string, v float64) []byte {
	b = f.appendLabels(b, values)
	field := protowire.Number(2) // Metric.gauge
	if f.typ == dto.MetricType_COUNTER {
		field = 3 // Metric.counter
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeFixed64()))
	b = protowire.AppendTag(b, 1, protowire.Fixed64Type) // Gauge.value, Counter.value
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// appendLabels appends a Metric's label fields, in name order.
func (f *family) appendLabels(b []byte, values []string) []byte {
	for i, j := range f.order {
		name, value := f.labelNames[i], values[j]
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(name))+protowire.SizeTag(2)+protowire.SizeBytes(len(value))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, value)
	}
	return b
}

// headers encodes what every exposition of f starts with.
func (f *family) headers() {
	var t []byte
	t = append(t, "# HELP "...)
	t = append(t, f.name...)
	t = append(t, ' ')
	t = appendEscaped(t, f.help, false)
	t = append(t, "\n# TYPE "...)
	t = append(t, f.name...)
	switch f.typ {
	case dto.MetricType_COUNTER:
		t = append(t, " counter\n"...)
	case dto.MetricType_GAUGE:
		t = append(t, " gauge\n"...)
	case dto.MetricType_HISTOGRAM:
		t = append(t, " histogram\n"...)
	default:
		t = append(t, " untyped\n"...)
	}
	f.textHeader = t
	var p []byte
	p = protowire.AppendTag(p, 1, protowire.BytesType) // MetricFamily.name
	p = protowire.AppendString(p, f.name)
	p = protowire.AppendTag(p, 2, protowire.BytesType) // help
	p = protowire.AppendString(p, f.help)
	p = protowire.AppendTag(p, 3, protowire.VarintType) // type
	p = protowire.AppendVarint(p, uint64(f.typ))
	f.pbHeader = p
}
