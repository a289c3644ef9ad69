package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// newDashboard is a Plumbline dashboard: provisioned (read-only), the
// last 7 days in UTC, refreshed every 5 minutes, with the datasource,
// profile, host and mount_point variables every dashboard shares.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder(title).Uid(uid).Description(description).Tags([]string{"plumbline"}).
		Readonly().Time("now-7d", "now").Refresh("5m").Timezone("utc")
	d.WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	for _, v := range []struct{ name, selector string }{
		{"profile", "plumbline_volume_info"},
		{"host", `plumbline_volume_info{profile=~"$profile"}`},
		{"mount_point", `plumbline_volume_info{host=~"$host",profile=~"$profile"}`},
	} {
		def := "label_values(" + v.selector + ", " + v.name + ")"
		d.WithVariable(dashboard.NewQueryVariableBuilder(v.name).Datasource(datasource()).
			Query(dashboard.StringOrMap{Map: map[string]any{"query": def, "refId": v.name}}).Definition(def).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).IncludeAll(true).Multi(true).AllValue(".*").
			Sort(dashboard.VariableSortAlphabeticalAsc))
	}
	return d
}

// datasource is the dashboards' Prometheus: the datasource variable.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

func grid(x, y, w, h uint32) dashboard.GridPos { return dashboard.GridPos{X: x, Y: y, W: w, H: h} }

// query is a range query drawn as series named by legend.
func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(ref).Datasource(datasource()).Expr(expr).LegendFormat(legend)
}

// tableQuery is an instant query shown as a table (one row per series).
func tableQuery(ref, expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(ref).Datasource(datasource()).Expr(expr).
		Format(prometheus.PromQueryFormatTable).Instant()
}

// heatmapQuery is a range query of histogram buckets (classic, by le, or
// native) for a heatmap.
func heatmapQuery(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return query(ref, expr, legend).Format(prometheus.PromQueryFormatHeatmap)
}

func transform(id string, options map[string]any) dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{Id: id, Options: options}
}

// withLatencyHeatmap draws latency buckets as they come (no calculation)
// on a time axis, seconds up the y axis, empty buckets blank.
func withLatencyHeatmap(p *heatmap.PanelBuilder) *heatmap.PanelBuilder {
	return p.Unit("s").Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s").AxisPlacement(common.AxisPlacementLeft)).
		CellGap(1).
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Oranges").Steps(64).
			Exponent(0.5).Fill("dark-orange").Scale(heatmap.HeatmapColorScaleExponential)).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutAuto)).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		ShowLegend().FilterValues(heatmap.NewFilterValueRangeBuilder().Le(1e-9)).ShowValue(common.VisibilityModeNever)
}

// maintenanceMappings: no runs held back reads probing, any held back
// maintenance.
func maintenanceMappings() []dashboard.ValueMapping {
	return []dashboard.ValueMapping{
		{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: map[string]dashboard.ValueMappingResult{
			"0": {Text: cog.ToPtr("probing"), Color: cog.ToPtr("transparent"), Index: cog.ToPtr[int32](0)}}}},
		{RangeMap: &dashboard.RangeMap{Type: dashboard.MappingTypeRangeToText, Options: dashboard.DashboardRangeMapOptions{
			From: cog.ToPtr(1e-6), To: cog.ToPtr(1e12),
			Result: dashboard.ValueMappingResult{Text: cog.ToPtr("maintenance"), Color: cog.ToPtr("purple"), Index: cog.ToPtr[int32](1)}}}},
	}
}

// labelColumns are the table column names of the series labels, with
// extra (the value columns of a table) merged in.
func labelColumns(extra map[string]any) map[string]any {
	m := map[string]any{"host": "Host", "mount_point": "Mount point", "device": "Device", "fs": "File system", "raid_level": "RAID",
		"stripe_unit_bytes": "Stripe unit", "data_offset_bytes": "Data offset", "cluster": "Allocation unit", "media": "Media",
		"profile": "Profile", "verdict": "Verdict", "rule": "Rule", "severity": "Severity", "kind": "Probe kind", "reference": "Reference"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// hidden are the columns a table hides: the instant query's Time, the
// scrape's labels, and columns (a value column that only joins).
func hidden(columns ...string) map[string]any {
	m := map[string]any{"Time": true, "__name__": true, "instance": true, "job": true}
	for _, c := range columns {
		m[c] = true
	}
	return m
}
