package exporter

import (
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// appendFamilyText appends a family in the text exposition format 0.0.4,
// byte for byte as expfmt.MetricFamilyToText writes it for the families
// this package builds (legal names, no timestamps; gauges, counters and
// histograms with their classic buckets), without its per-write overhead.
func appendFamilyText(b []byte, mf *dto.MetricFamily) []byte {
	name := mf.GetName()
	if mf.Help != nil {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = appendEscaped(b, mf.GetHelp(), false)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE "...)
	b = append(b, name...)
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		b = append(b, " counter\n"...)
	case dto.MetricType_GAUGE:
		b = append(b, " gauge\n"...)
	case dto.MetricType_HISTOGRAM:
		b = append(b, " histogram\n"...)
	default:
		b = append(b, " untyped\n"...)
	}
	for _, m := range mf.Metric {
		switch {
		case m.Counter != nil:
			b = appendSample(b, name, "", m.Label, math.NaN(), m.Counter.GetValue())
		case m.Gauge != nil:
			b = appendSample(b, name, "", m.Label, math.NaN(), m.Gauge.GetValue())
		case m.Histogram != nil:
			h := m.Histogram
			inf := false
			for _, bk := range h.Bucket {
				b = appendSample(b, name, "_bucket", m.Label, bk.GetUpperBound(), float64(bk.GetCumulativeCount()))
				inf = inf || math.IsInf(bk.GetUpperBound(), +1)
			}
			if !inf {
				b = appendSample(b, name, "_bucket", m.Label, math.Inf(+1), float64(h.GetSampleCount()))
			}
			b = appendSample(b, name, "_sum", m.Label, math.NaN(), h.GetSampleSum())
			b = appendSample(b, name, "_count", m.Label, math.NaN(), float64(h.GetSampleCount()))
		}
	}
	return b
}

// appendSample appends one line; le is the bucket bound, NaN for none.
func appendSample(b []byte, name, suffix string, labels []*dto.LabelPair, le, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	withLE := !math.IsNaN(le)
	if len(labels) > 0 || withLE {
		sep := byte('{')
		for _, l := range labels {
			b = append(b, sep)
			b = append(b, l.GetName()...)
			b = append(b, `="`...)
			b = appendEscaped(b, l.GetValue(), true)
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

// appendFloat formats as expfmt does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendEscaped escapes backslash and newline, and the double quote in
// label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
