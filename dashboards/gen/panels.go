package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/piechart"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// alignmentInventory is dashboards/alignment-inventory.json.
func alignmentInventory() *dashboard.DashboardBuilder {
	d := newDashboard("plumbline-alignment", "Plumbline / Alignment inventory",
		"Every misaligned volume with its offset, stripe unit, predicted split share and the remediation.")
	d.WithPanel(table.NewPanelBuilder().Id(1).Title("Misaligned volumes").
		Description("Offset, stripe unit and predicted split share per misaligned volume; where the geometry probe (stripe-scan) measured the stripe unit, where the unit comes from (measured: inferred), the probe's confidence, the measured cost of one split read and what it comes to per 8 KiB I/O (predicted split × cost). Remediation: move the data off, re-create the partition at 1 MiB, re-format with stripe hints, copy back (docs/runbooks/PlumblineVolumeMisaligned.md).").
		Datasource(datasource()).GridPos(grid(0, 0, 24, 12)).
		WithTarget(tableQuery("A", `max by (agent_id, host, mount_point, device, raid_level, stripe_unit_bytes, data_offset_bytes, profile) (plumbline_volume_info{verdict="misaligned",host=~"$host",mount_point=~"$mount_point",profile=~"$profile"})`)).
		WithTarget(tableQuery("B", `max by (agent_id, host, mount_point) (plumbline_volume_split_fraction{io_size_bytes="8192",host=~"$host",mount_point=~"$mount_point"}) and on (agent_id, host, mount_point) plumbline_volume_info{verdict="misaligned"}`)).
		WithTarget(tableQuery("C", `max by (agent_id, host, mount_point) (plumbline_volume_split_fraction{io_size_bytes="65536",host=~"$host",mount_point=~"$mount_point"}) and on (agent_id, host, mount_point) plumbline_volume_info{verdict="misaligned"}`)).
		WithTarget(tableQuery("D", `max by (agent_id, host, mount_point, stripe_unit_source) (plumbline_volume_stripe_unit_confidence{host=~"$host",mount_point=~"$mount_point"}) and on (agent_id, host, mount_point) plumbline_volume_info{verdict="misaligned"}`)).
		WithTarget(tableQuery("E", `max by (agent_id, host, mount_point) (plumbline_volume_measured_split_cost_seconds{host=~"$host",mount_point=~"$mount_point"}) and on (agent_id, host, mount_point) plumbline_volume_info{verdict="misaligned"}`)).
		WithTarget(tableQuery("F", `(max by (agent_id, host, mount_point) (plumbline_volume_split_fraction{io_size_bytes="8192",host=~"$host",mount_point=~"$mount_point"}) + max by (agent_id, host, mount_point) (plumbline_volume_granularity_split_fraction{io_size_bytes="8192",host=~"$host",mount_point=~"$mount_point"})) * on (agent_id, host, mount_point) max by (agent_id, host, mount_point) (plumbline_volume_measured_split_cost_seconds{host=~"$host",mount_point=~"$mount_point"}) and on (agent_id, host, mount_point) plumbline_volume_info{verdict="misaligned"}`)).
		OverrideByName("8 KiB I/Os split", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}, {Id: "decimals", Value: 1}}).
		OverrideByName("64 KiB I/Os split", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}, {Id: "decimals", Value: 1}}).
		OverrideByName("Stripe unit", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}}).
		OverrideByName("Data offset", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}}).
		OverrideByName("Stripe unit confidence", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}, {Id: "decimals", Value: 1}}).
		OverrideByName("Split cost (measured)", []dashboard.DynamicConfigValue{{Id: "unit", Value: "s"}}).
		OverrideByName("8 KiB penalty (measured)", []dashboard.DynamicConfigValue{{Id: "unit", Value: "s"}}).
		WithTransformation(transform("merge", map[string]any{})).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden("Value #A"), "renameByName": labelColumns(map[string]any{"Value #B": "8 KiB I/Os split", "Value #C": "64 KiB I/Os split", "stripe_unit_source": "Stripe unit from", "Value #D": "Stripe unit confidence", "Value #E": "Split cost (measured)", "Value #F": "8 KiB penalty (measured)"}), "indexByName": map[string]any{"host": 0, "mount_point": 1, "device": 2, "raid_level": 3, "stripe_unit_bytes": 4, "data_offset_bytes": 5, "profile": 6, "Value #B": 7, "Value #C": 8, "stripe_unit_source": 9, "Value #D": 10, "Value #E": 11, "Value #F": 12}})).
		WithTransformation(transform("convertFieldType", map[string]any{"conversions": []any{map[string]any{"targetField": "Stripe unit", "destinationType": "number"}, map[string]any{"targetField": "Data offset", "destinationType": "number"}}, "fields": map[string]any{}})).
		WithTransformation(transform("sortBy", map[string]any{"sort": []any{map[string]any{"field": "8 KiB I/Os split", "desc": true}}})))
	d.WithPanel(table.NewPanelBuilder().Id(2).Title("Remediation findings").
		Description("Critical and warning findings per volume; the inventory API has each one's message and remediation.").
		Datasource(datasource()).GridPos(grid(0, 12, 24, 10)).
		WithTarget(tableQuery("A", `max by (agent_id, host, mount_point, rule, severity) (plumbline_volume_finding{severity=~"critical|warning",host=~"$host",mount_point=~"$mount_point"})`)).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden("Value"), "renameByName": labelColumns(nil), "indexByName": map[string]any{"host": 0, "mount_point": 1, "severity": 2, "rule": 3}})))
	d.WithPanel(bargauge.NewPanelBuilder().Id(3).Title("Misaligned volumes by profile").
		Description("Misaligned volumes per profile.").
		Datasource(datasource()).GridPos(grid(0, 22, 24, 8)).
		WithTarget(query("A", `sum by (profile) (plumbline_volumes{verdict="misaligned",profile=~"$profile"})`, "{{profile}}")).
		Unit("short"))
	return d
}

// fleetOverview is dashboards/fleet-overview.json.
func fleetOverview() *dashboard.DashboardBuilder {
	d := newDashboard("plumbline-fleet", "Plumbline / Fleet overview",
		"The fleet at a glance: verdicts, estimated misalignment penalty, worst volumes, latency by profile, agents, and the Plumbline server itself.")
	d.WithPanel(piechart.NewPanelBuilder().Id(1).Title("Volumes by verdict").
		Description("Present volumes by the server's alignment verdict (aligned, misaligned, unknown).").
		Datasource(datasource()).GridPos(grid(0, 0, 8, 8)).
		WithTarget(query("A", `sum by (verdict) (plumbline_volumes{profile=~"$profile"})`, "{{verdict}}")).
		Unit("short"))
	d.WithPanel(stat.NewPanelBuilder().Id(2).Title("Estimated fleet-wide penalty (mean 8 KiB split share)").
		Description("Mean predicted share of 8 KiB I/Os the arrays split, over volumes with a known stripe unit: the fleet's estimated misalignment penalty.").
		Datasource(datasource()).GridPos(grid(8, 0, 8, 8)).
		WithTarget(query("A", "plumbline:volume_split_fraction_8k:avg", "split share")).
		Unit("percentunit"))
	d.WithPanel(stat.NewPanelBuilder().Id(3).Title("Agents up").
		Description("Agents that reported within the stale threshold, of all registered agents.").
		Datasource(datasource()).GridPos(grid(16, 0, 8, 8)).
		WithTarget(query("A", "plumbline:agent_up:sum", "up")).
		WithTarget(query("B", "plumbline:agent_up:count", "registered")).
		Unit("short"))
	d.WithPanel(table.NewPanelBuilder().Id(4).Title("Worst volumes (8 KiB split share)").
		Description("The 20 misaligned volumes with the largest predicted share of 8 KiB I/Os split by the array.").
		Datasource(datasource()).GridPos(grid(0, 8, 12, 8)).
		WithTarget(tableQuery("A", `topk(20, max by (agent_id, host, mount_point) (plumbline_volume_split_fraction{io_size_bytes="8192",host=~"$host"}) * on (agent_id, host, mount_point) group_left (profile) max by (agent_id, host, mount_point, profile) (plumbline_volume_info{profile=~"$profile",verdict="misaligned"}))`)).
		OverrideByName("8 KiB I/Os split", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}, {Id: "decimals", Value: 1}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"host": "Host", "mount_point": "Mount point", "profile": "Profile", "Value": "8 KiB I/Os split"}, "indexByName": map[string]any{"host": 0, "mount_point": 1, "profile": 2, "Value": 3}})).
		WithTransformation(transform("sortBy", map[string]any{"sort": []any{map[string]any{"field": "8 KiB I/Os split", "desc": true}}})))
	d.WithPanel(table.NewPanelBuilder().Id(5).Title("Worst volumes (latency vs cohort)").
		Description("The 20 volumes whose last probe run was slowest against the median of their cohort (same profile), by probe kind.").
		Datasource(datasource()).GridPos(grid(12, 8, 12, 8)).
		WithTarget(tableQuery("A", `topk(20, max by (agent_id, host, mount_point, kind) (plumbline_baseline_ratio{reference="cohort",host=~"$host"}) and on (agent_id, host, mount_point) plumbline_volume_info{profile=~"$profile"})`)).
		OverrideByName("× cohort median", []dashboard.DynamicConfigValue{{Id: "unit", Value: "suffix:×"}, {Id: "decimals", Value: 2}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"host": "Host", "mount_point": "Mount point", "kind": "Probe kind", "Value": "× cohort median"}, "indexByName": map[string]any{"host": 0, "mount_point": 1, "kind": 2, "Value": 3}})).
		WithTransformation(transform("sortBy", map[string]any{"sort": []any{map[string]any{"field": "× cohort median", "desc": true}}})))
	d.WithPanel(withLatencyHeatmap(heatmap.NewPanelBuilder().Id(6).Title("Latency heatmap").
		Description("Probe operations by latency over time (every kind). A: the classic buckets (powers of two, 61 µs to 8 s) through the by-profile recording rule; B: the native histograms (schema 3, ~9% buckets) when Prometheus ingests them (--enable-feature=native-histograms; Prometheus 2.x then keeps no classic buckets unless scrape_classic_histograms is set).").
		Datasource(datasource()).GridPos(grid(0, 16, 12, 8)).
		WithTarget(heatmapQuery("A", `sum by (le) (plumbline:probe_latency_seconds_bucket:rate1h_by_profile{profile=~"$profile"})`, "{{le}}")).
		WithTarget(heatmapQuery("B", `sum(rate(plumbline_probe_latency_seconds{host=~"$host"}[$__rate_interval]) and on (agent_id, host, mount_point) plumbline_volume_info{profile=~"$profile"})`, "native")).
		Unit("s")))
	d.WithPanel(timeseries.NewPanelBuilder().Id(7).Title("Mean probe latency by profile").
		Description("Mean probe latency per profile and kind over the last hour (the by-profile recording rule).").
		Datasource(datasource()).GridPos(grid(12, 16, 12, 8)).
		WithTarget(query("A", `plumbline:probe_latency_seconds:mean1h_by_profile{profile=~"$profile"}`, "{{profile}} {{kind}}")).
		Unit("s"))
	d.WithPanel(stat.NewPanelBuilder().Id(8).Title("Degraded volumes").
		Description("Volumes degraded against any reference now.").
		Datasource(datasource()).GridPos(grid(0, 24, 8, 8)).
		WithTarget(query("A", "plumbline:volumes_degraded:count", "degraded")).
		Unit("short"))
	d.WithPanel(table.NewPanelBuilder().Id(9).Title("Volumes by profile and verdict").
		Description("Present volumes by profile and alignment verdict.").
		Datasource(datasource()).GridPos(grid(8, 24, 16, 8)).
		WithTarget(tableQuery("A", `plumbline:volumes:sum_by_profile_verdict{profile=~"$profile"}`)).
		OverrideByName("Volumes", []dashboard.DynamicConfigValue{{Id: "unit", Value: "short"}, {Id: "decimals", Value: 0}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"profile": "Profile", "verdict": "Verdict", "Value": "Volumes"}, "indexByName": map[string]any{"profile": 0, "verdict": 1, "Value": 2}})))
	d.WithPanel(statetimeline.NewPanelBuilder().Id(10).Title("Maintenance windows: probe runs held back").
		Description("Hosts whose probe runs a maintenance window held back (skipped, or stopped at the window's start: stop reason maintenance), from the agents' maintenance windows (their file and central policy). A bar is a window in which at least one run was due.").
		Datasource(datasource()).GridPos(grid(0, 32, 24, 8)).
		WithTarget(query("A", `sum by (host) (increase(plumbline_probe_stops_total{reason="maintenance",host=~"$host"}[$__rate_interval]))`, "{{host}}")).
		Unit("short").
		Mappings(maintenanceMappings()).
		ShowValue(common.VisibilityModeNever).MergeValues(true))
	d.WithPanel(table.NewPanelBuilder().Id(11).Title("Agent certificates expiring first").
		Description("The 20 agents whose client certificate (as presented at their last connection) expires first. Agents renew from two thirds of the lifetime on; PlumblineAgentCertificateExpiring warns with a fifth left.").
		Datasource(datasource()).GridPos(grid(0, 40, 24, 8)).
		WithTarget(tableQuery("A", `bottomk(20, max by (agent_id, host) (plumbline_agent_client_certificate_expiry_timestamp_seconds{host=~"$host"}) - time())`)).
		OverrideByName("Expires in", []dashboard.DynamicConfigValue{{Id: "unit", Value: "s"}, {Id: "decimals", Value: 0}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"agent_id": "Agent", "host": "Host", "Value": "Expires in"}, "indexByName": map[string]any{"agent_id": 0, "host": 1, "Value": 2}})).
		WithTransformation(transform("sortBy", map[string]any{"sort": []any{map[string]any{"field": "Expires in", "desc": false}}})))
	return withServerRow(d)
}

// volumeDetail is dashboards/volume-detail.json.
func volumeDetail() *dashboard.DashboardBuilder {
	d := newDashboard("plumbline-volume", "Plumbline / Volume detail",
		"One volume in depth: geometry stack, verdict and findings, latency against its baseline and cohort, probe skips.")
	d.Annotation(dashboard.NewAnnotationQueryBuilder().Name("Maintenance windows").Datasource(datasource()).Enable(true).IconColor("purple").
		Expr(`sum by (host) (increase(plumbline_probe_stops_total{reason="maintenance",host=~"$host"}[$__interval])) > 0`).
		Step("1m").TitleFormat("maintenance window").TextFormat("probe runs on {{host}} held back by a maintenance window"))
	d.WithPanel(table.NewPanelBuilder().Id(1).Title("Geometry stack").
		Description("The volume's geometry as the server last read it, and its alignment verdict.").
		Datasource(datasource()).GridPos(grid(0, 0, 24, 5)).
		WithTarget(tableQuery("A", `max by (agent_id, host, mount_point, device, fs, raid_level, stripe_unit_bytes, data_offset_bytes, cluster, media, profile, verdict) (plumbline_volume_info{host=~"$host",mount_point=~"$mount_point"})`)).
		OverrideByName("Stripe unit", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}}).
		OverrideByName("Data offset", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}}).
		OverrideByName("Allocation unit", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden("Value"), "renameByName": labelColumns(nil), "indexByName": map[string]any{"host": 0, "mount_point": 1, "device": 2, "fs": 3, "raid_level": 4, "stripe_unit_bytes": 5, "data_offset_bytes": 6, "cluster": 7, "media": 8, "profile": 9, "verdict": 10}})).
		WithTransformation(transform("convertFieldType", map[string]any{"conversions": []any{map[string]any{"targetField": "Stripe unit", "destinationType": "number"}, map[string]any{"targetField": "Data offset", "destinationType": "number"}, map[string]any{"targetField": "Allocation unit", "destinationType": "number"}}, "fields": map[string]any{}})))
	d.WithPanel(table.NewPanelBuilder().Id(2).Title("Findings").
		Description("The alignment rules' findings on the volume (the inventory API has each one's message and remediation).").
		Datasource(datasource()).GridPos(grid(0, 5, 12, 6)).
		WithTarget(tableQuery("A", `max by (agent_id, host, mount_point, rule, severity) (plumbline_volume_finding{host=~"$host",mount_point=~"$mount_point"})`)).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden("Value"), "renameByName": labelColumns(nil), "indexByName": map[string]any{"host": 0, "mount_point": 1, "severity": 2, "rule": 3}})))
	d.WithPanel(bargauge.NewPanelBuilder().Id(3).Title("Predicted split share").
		Description("Predicted share of I/Os of each size the array splits because of where the data starts (split-I/O model; the offset-caused split). Where the geometry probe measured the stripe unit, the measured cost of a split and the penalty it comes to per I/O are beside it.").
		Datasource(datasource()).GridPos(grid(12, 5, 12, 6)).
		WithTarget(query("A", `plumbline_volume_split_fraction{host=~"$host",mount_point=~"$mount_point"}`, "{{io_size_bytes}} B")).
		Unit("percentunit").
		Min(0).
		Max(1))
	d.WithPanel(stat.NewPanelBuilder().Id(12).Title("Stripe unit confidence").
		Description("How sure the geometry probe (stripe-scan) is of the stripe unit behind the verdict, and where that unit comes from: measured (inferred by the probe because no layer knows one), or the source whose unit the probe confirmed or contradicted (see the stripe-unit-measured and stripe-unit-disagrees findings). Empty when the volume has no stripe-scan measurement.").
		Datasource(datasource()).GridPos(grid(0, 11, 8, 6)).
		WithTarget(query("A", `max by (mount_point, stripe_unit_source) (plumbline_volume_stripe_unit_confidence{host=~"$host",mount_point=~"$mount_point"})`, "{{mount_point}} stripe unit from {{stripe_unit_source}}")).
		Unit("percentunit").
		Min(0).
		Max(1).
		TextMode(common.BigValueTextModeValueAndName).ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})))
	d.WithPanel(stat.NewPanelBuilder().Id(13).Title("Measured split cost").
		Description("Measured extra latency of one read split across two stripe units (the geometry probe's straddle cost) on the judged stripe unit. The inventory API has its interval. Empty when not measured.").
		Datasource(datasource()).GridPos(grid(8, 11, 8, 6)).
		WithTarget(query("A", `max by (mount_point) (plumbline_volume_measured_split_cost_seconds{host=~"$host",mount_point=~"$mount_point"})`, "{{mount_point}}")).
		Unit("s").
		Min(0).
		TextMode(common.BigValueTextModeValueAndName).ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})))
	d.WithPanel(bargauge.NewPanelBuilder().Id(14).Title("Measured penalty per I/O").
		Description("What splits cost an average I/O of each size: the predicted split share (offset-caused plus allocation-granularity) times the measured cost of one split (the inventory API's measured_penalty_seconds). Empty when the split cost is not measured.").
		Datasource(datasource()).GridPos(grid(16, 11, 8, 6)).
		WithTarget(query("A", `max by (mount_point, io_size_bytes) ((max by (agent_id, host, mount_point, io_size_bytes) (plumbline_volume_split_fraction{host=~"$host",mount_point=~"$mount_point"}) + max by (agent_id, host, mount_point, io_size_bytes) (plumbline_volume_granularity_split_fraction{host=~"$host",mount_point=~"$mount_point"})) * on (agent_id, host, mount_point) group_left max by (agent_id, host, mount_point) (plumbline_volume_measured_split_cost_seconds{host=~"$host",mount_point=~"$mount_point"}))`, "{{io_size_bytes}} B")).
		Unit("s").
		Min(0))
	return withRAIDRow(withDatabaseRow(withVolumeLatency(d)))
}

// withVolumeLatency adds volume-detail's latency, baseline and probe
// panels.
func withVolumeLatency(d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	d.WithPanel(timeseries.NewPanelBuilder().Id(4).Title("Mean latency per probe kind").
		Description("Mean probe latency per kind: from the native histograms when Prometheus ingests them, else from _sum/_count (exact either way).").
		Datasource(datasource()).GridPos(grid(0, 17, 12, 8)).
		WithTarget(query("A", `sum by (mount_point, kind) (histogram_sum(rate(plumbline_probe_latency_seconds{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))) / sum by (mount_point, kind) (histogram_count(rate(plumbline_probe_latency_seconds{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))) or sum by (mount_point, kind) (rate(plumbline_probe_latency_seconds_sum{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval])) / sum by (mount_point, kind) (rate(plumbline_probe_latency_seconds_count{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))`, "{{mount_point}} {{kind}}")).
		Unit("s"))
	d.WithPanel(timeseries.NewPanelBuilder().Id(5).Title("Latency vs baseline and cohort").
		Description("The last run's median latency over each reference: the volume's own history, its cohort, or the profile's prior.").
		Datasource(datasource()).GridPos(grid(12, 17, 12, 8)).
		WithTarget(query("A", `max by (mount_point, kind, reference, signal) (plumbline_baseline_ratio{host=~"$host",mount_point=~"$mount_point"})`, "{{mount_point}} {{kind}} {{signal}} vs {{reference}}")).
		Unit("suffix:×").
		Decimals(2))
	d.WithPanel(table.NewPanelBuilder().Id(6).Title("Degraded since").
		Description("Probe kinds degraded now, since when and against which reference.").
		Datasource(datasource()).GridPos(grid(0, 25, 12, 8)).
		WithTarget(tableQuery("A", `max by (mount_point, kind, reference) (plumbline_baseline_degraded_since_timestamp_seconds{host=~"$host",mount_point=~"$mount_point"}) * 1000`)).
		OverrideByName("Degraded since", []dashboard.DynamicConfigValue{{Id: "unit", Value: "dateTimeAsIso"}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": labelColumns(map[string]any{"Value": "Degraded since"}), "indexByName": map[string]any{"mount_point": 0, "kind": 1, "reference": 2, "Value": 3}})))
	d.WithPanel(timeseries.NewPanelBuilder().Id(7).Title("Probe skips and stops by reason").
		Description("Probe runs skipped or stopped before their op budget, by reason. Reason maintenance: a maintenance window held the run back (the Maintenance windows annotation marks them on every panel).").
		Datasource(datasource()).GridPos(grid(12, 25, 12, 8)).
		WithTarget(query("A", `sum by (mount_point, reason) (increase(plumbline_probe_stops_total{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))`, "{{mount_point}} {{reason}}")).
		Unit("short"))
	d.WithPanel(stat.NewPanelBuilder().Id(8).Title("Time since last completed probe").
		Description("Time since the last probe run that completed operations, any kind.").
		Datasource(datasource()).GridPos(grid(0, 33, 12, 8)).
		WithTarget(query("A", `time() - max by (mount_point) (plumbline_volume_last_probe_timestamp_seconds{host=~"$host",mount_point=~"$mount_point"})`, "{{mount_point}}")).
		Unit("s"))
	d.WithPanel(stat.NewPanelBuilder().Id(9).Title("md members missing").
		Description("md arrays under the volume: raid_disks minus the roles an in-sync member fills (a faulty member md still lists counts as missing).").
		Datasource(datasource()).GridPos(grid(12, 33, 12, 8)).
		WithTarget(query("A", `max by (mount_point, device) (plumbline_volume_raid_missing_members{host=~"$host",mount_point=~"$mount_point"})`, "{{device}}")).
		Unit("short"))
	d.WithPanel(withLatencyHeatmap(heatmap.NewPanelBuilder().Id(10).Title("Latency distribution").
		Description("Probe operations of the selected volumes by latency over time. A: classic buckets (powers of two, 61 µs to 8 s); B: native histograms (schema 3) when Prometheus ingests them.").
		Datasource(datasource()).GridPos(grid(0, 41, 24, 9)).
		WithTarget(heatmapQuery("A", `sum by (le) (rate(plumbline_probe_latency_seconds_bucket{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))`, "{{le}}")).
		WithTarget(heatmapQuery("B", `sum(rate(plumbline_probe_latency_seconds{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))`, "native")).
		Unit("s")))
	d.WithPanel(timeseries.NewPanelBuilder().Id(11).Title("Latency percentiles").
		Description("Median and 99th percentile probe latency per kind: from the native histograms (buckets ~9% wide) when Prometheus ingests them, else from the classic buckets (by default a factor of 8 apart: the percentile is interpolated within one).").
		Datasource(datasource()).GridPos(grid(0, 50, 24, 8)).
		WithTarget(query("A", `histogram_quantile(0.5, sum by (kind) (rate(plumbline_probe_latency_seconds{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))) or histogram_quantile(0.5, sum by (kind, le) (rate(plumbline_probe_latency_seconds_bucket{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval])))`, "{{kind}} p50")).
		WithTarget(query("B", `histogram_quantile(0.99, sum by (kind) (rate(plumbline_probe_latency_seconds{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval]))) or histogram_quantile(0.99, sum by (kind, le) (rate(plumbline_probe_latency_seconds_bucket{host=~"$host",mount_point=~"$mount_point"}[$__rate_interval])))`, "{{kind}} p99")).
		Unit("s"))
	return d
}
