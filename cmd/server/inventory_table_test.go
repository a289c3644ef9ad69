package main

import (
	"strings"
	"testing"
)

// TestTableRowMeasured: the list's table says when the stripe unit was
// inferred by the geometry probe, how sure it is, and what one split I/O
// was measured to cost; a volume without a measurement shows the unknown
// marker in SPLIT COST and a plain stripe unit.
func TestTableRowMeasured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      []string // columns
	}{
		{"measured", `{"id":"a1","host":"db1","mount_point":"/data","profile":"p","severity":"info","alignment":{"verdict":"misaligned",
			"data_offset_bytes":32256,"stripe_unit_bytes":65536,"stripe_unit_source":"measured","stripe_unit_confidence":0.9996,
			"split_fraction":{"8192":0.125},"measured_split_cost_seconds":0.00081}}`,
			[]string{"db1", "/data", "misaligned", "31.5KiB", "64KiB (measured, 99%)", "12.5%", "0.81ms", "info", "p", "a1"}},
		{"confirmed, fast", `{"id":"b2","host":"db2","mount_point":"/pg","profile":"p","severity":"none","alignment":{"verdict":"aligned",
			"data_offset_bytes":1048576,"stripe_unit_bytes":524288,"stripe_unit_source":"sysfs","stripe_unit_confidence":0.995,
			"split_fraction":{"8192":0},"measured_split_cost_seconds":0.000085}}`,
			[]string{"db2", "/pg", "aligned", "1MiB", "512KiB", "0.0%", "85µs", "none", "p", "b2"}},
		{"not measured", `{"id":"c3","host":"db3","mount_point":"/log","profile":"p","severity":"warning","alignment":{"verdict":"unknown"}}`,
			[]string{"db3", "/log", "unknown", "-", "-", "-", "-", "warning", "p", "c3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Split(tableRow([]byte(tc.raw)), "\t")
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("tableRow = %q, want %q", got, tc.want)
			}
		})
	}
}
