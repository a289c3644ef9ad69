package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// databaseRowY is where volume-detail's Database row starts (below the
// latency percentiles).
const databaseRowY = 58

// withDatabaseRow adds volume-detail's "Database" row: the database's own
// latency on the volume overlaid on the probe's, its rates, and its
// regression with the attribution (PlumblineDatabaseLatencyRegression).
// Empty for a volume holding no database files.
func withDatabaseRow(d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	y := uint32(databaseRowY)
	sel := `{host=~"$host",mount_point=~"$mount_point"}`
	d.WithRow(dashboard.NewRowBuilder("Database").Id(40).GridPos(grid(0, y, 24, 1)))
	d.WithPanel(timeseries.NewPanelBuilder().Id(41).Title("Database latency beside the probe's").
		Description("The database's own latency per operation on the volume (Δtime/Δops over the agent's interval, as PostgreSQL or MySQL count it; solid) and the probe's mean latency per kind on the same volume (dashed). Both up together: the device; the database's alone: the load or the database; see the attribution beside. An operation the database does not time has no line (Not measured).").
		Datasource(datasource()).GridPos(grid(0, y+1, 16, 9)).
		WithTarget(query("A", `max by (source, op) (plumbline_database_latency_seconds`+sel+`)`, "db {{source}} {{op}}")).
		WithTarget(query("B", `sum by (kind) (histogram_sum(rate(plumbline_probe_latency_seconds`+sel+`[$__rate_interval]))) / sum by (kind) (histogram_count(rate(plumbline_probe_latency_seconds`+sel+`[$__rate_interval]))) or sum by (kind) (rate(plumbline_probe_latency_seconds_sum`+sel+`[$__rate_interval])) / sum by (kind) (rate(plumbline_probe_latency_seconds_count`+sel+`[$__rate_interval]))`, "probe {{kind}}")).
		OverrideByQuery("B", []dashboard.DynamicConfigValue{{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []any{10, 10}}}}).
		Unit("s"))
	d.WithPanel(table.NewPanelBuilder().Id(42).Title("Database regression and attribution").
		Description("Operations whose latency is degraded against their own history now: the last interval over the history's median, and whose fault from the probe's view (device, load-or-database, throttle, undetermined). The inventory API's database reason has the numbers.").
		Datasource(datasource()).GridPos(grid(16, y+1, 8, 9)).
		WithTarget(tableQuery("A", `max by (source, op, attribution) (plumbline_database_regression_ratio`+sel+`)`)).
		OverrideByName("Ratio", []dashboard.DynamicConfigValue{{Id: "unit", Value: "suffix:×"}, {Id: "decimals", Value: 2}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"source": "Source", "op": "Operation", "attribution": "Attribution", "Value": "Ratio"}, "indexByName": map[string]any{"source": 0, "op": 1, "attribution": 2, "Value": 3}})))
	d.WithPanel(timeseries.NewPanelBuilder().Id(43).Title("Database operations per second").
		Description("Operations the database counted on the volume per second, by operation: more operations at the same device latency is load.").
		Datasource(datasource()).GridPos(grid(0, y+10, 16, 8)).
		WithTarget(query("A", `max by (source, op) (plumbline_database_operations_per_second`+sel+`)`, "{{source}} {{op}}")).
		Unit("ops"))
	d.WithPanel(table.NewPanelBuilder().Id(44).Title("Not measured").
		Description("Operations the database counts but does not time (track_io_timing or track_wal_io_timing off, performance_schema timers off): their latency is unknown, not 0. The inventory API says why.").
		Datasource(datasource()).GridPos(grid(16, y+10, 8, 8)).
		WithTarget(tableQuery("A", `max by (source, op) (plumbline_database_not_measured`+sel+`)`)).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden("Value"), "renameByName": map[string]any{"source": "Source", "op": "Operation"}, "indexByName": map[string]any{"source": 0, "op": 1}})))
	return d
}
