package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// serverRowY is where fleet-overview's Plumbline server row starts (below
// the agent certificates).
const serverRowY = 48

// withServerRow adds fleet-overview's "Plumbline server" row: the server
// replicas watching themselves (the job the shipped rules scrape,
// job="plumbline"), as its alerts PlumblineServerDown,
// PlumblineEvaluatorStalled, PlumblineInventoryProjectionLagging and
// PlumblineNoLeader see it.
func withServerRow(d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	y := uint32(serverRowY)
	d.WithRow(dashboard.NewRowBuilder("Plumbline server").Id(12).GridPos(grid(0, y, 24, 1)))
	d.WithPanel(table.NewPanelBuilder().Id(13).Title("Server replicas").
		Description("Every server replica Prometheus scrapes (job plumbline): up or down, and the version it runs (plumbline_build_info). A replica that stopped keeps its row, without a version, while Prometheus still has its target; PlumblineServerDown pages after 5 minutes down.").
		Datasource(datasource()).GridPos(grid(0, y+1, 10, 7)).
		WithTarget(tableQuery("A", `max by (instance) (up{job="plumbline"}) * on (instance) group_left (version, revision, goversion) max by (instance, version, revision, goversion) (plumbline_build_info{job="plumbline"}) or on (instance) max by (instance) (up{job="plumbline"})`)).
		Mappings(upMappings()).
		OverrideByName("State", []dashboard.DynamicConfigValue{{Id: "unit", Value: "none"}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"instance": "Replica", "version": "Version", "revision": "Revision", "goversion": "Go", "Value": "State"}, "indexByName": map[string]any{"instance": 0, "Value": 1, "version": 2, "revision": 3, "goversion": 4}})))
	d.WithPanel(statetimeline.NewPanelBuilder().Id(14).Title("Loop leaders").
		Description("Which replica leads each background loop (evaluator, inventory, retention): the replica holding the loop's lease runs it, the others stand by. A loop no replica leads for 5 minutes raises PlumblineNoLeader.").
		Datasource(datasource()).GridPos(grid(10, y+1, 9, 7)).
		WithTarget(query("A", `max by (loop, instance) (plumbline_server_leader{job="plumbline"})`, "{{loop}} on {{instance}}")).
		Unit("short").
		Mappings(leaderMappings()).
		ShowValue(common.VisibilityModeNever).MergeValues(true))
	d.WithPanel(stat.NewPanelBuilder().Id(15).Title("Server certificate expires in").
		Description("Time left on each replica's gRPC TLS certificate (grpc.tls.cert_file, re-read at every scrape). Renew it before it runs out: server ca renew, or your PKI. Empty with grpc.insecure.").
		Datasource(datasource()).GridPos(grid(19, y+1, 5, 7)).
		WithTarget(query("A", `min by (instance) (plumbline_server_certificate_expiry_timestamp_seconds{job="plumbline"}) - time()`, "{{instance}}")).
		Unit("s").
		Decimals(0).
		TextMode(common.BigValueTextModeValueAndName).ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})))
	d.WithPanel(timeseries.NewPanelBuilder().Id(16).Title("Time since last success").
		Description("Time since the last evaluator pass, inventory projection sync and retention pass that succeeded, on whichever replica leads the loop. PlumblineEvaluatorStalled warns past 15 minutes, PlumblineInventoryProjectionLagging past 10.").
		Datasource(datasource()).GridPos(grid(0, y+8, 8, 8)).
		WithTarget(query("A", `time() - max(plumbline_evaluator_last_success_timestamp_seconds{job="plumbline"} > 0)`, "evaluator")).
		WithTarget(query("B", `time() - max(plumbline_server_inventory_sync_last_success_timestamp_seconds{job="plumbline"} > 0)`, "inventory projection")).
		WithTarget(query("C", `time() - max(plumbline_server_retention_last_success_timestamp_seconds{job="plumbline"} > 0)`, "retention")).
		Unit("s"))
	d.WithPanel(timeseries.NewPanelBuilder().Id(17).Title("Admission refusals by reason").
		Description("gRPC calls the server refused before reading their message, by reason: unauthenticated (no certificate), rate (an agent's rate limit), long_polls, busy (grpc.max_pending_reports reached: agents retry later), inflight_bytes, message_size, slow_message. And errors looking enrollment up (the store failing a certificate check).").
		Datasource(datasource()).GridPos(grid(8, y+8, 8, 8)).
		WithTarget(query("A", `sum by (reason) (rate(plumbline_grpc_calls_refused_total{job="plumbline"}[$__rate_interval]))`, "{{reason}}")).
		WithTarget(query("B", `sum(rate(plumbline_enrollment_lookup_errors_total{job="plumbline"}[$__rate_interval]))`, "enrollment lookup errors")).
		Unit("reqps"))
	d.WithPanel(timeseries.NewPanelBuilder().Id(18).Title("Reports in progress").
		Description("Report calls each replica has admitted and not yet answered; at grpc.max_pending_reports it refuses more (reason busy) with a retry hint.").
		Datasource(datasource()).GridPos(grid(16, y+8, 8, 8)).
		WithTarget(query("A", `max by (instance) (plumbline_grpc_reports_in_progress{job="plumbline"})`, "{{instance}}")).
		Unit("short"))
	return withServerProcess(d, y+16)
}

// withServerProcess adds the server row's process panels at y.
func withServerProcess(d *dashboard.DashboardBuilder, y uint32) *dashboard.DashboardBuilder {
	d.WithPanel(timeseries.NewPanelBuilder().Id(19).Title("Server memory (RSS)").
		Description("Resident memory of each server replica.").
		Datasource(datasource()).GridPos(grid(0, y, 8, 8)).
		WithTarget(query("A", `max by (instance) (process_resident_memory_bytes{job="plumbline"})`, "{{instance}}")).
		Unit("bytes"))
	d.WithPanel(timeseries.NewPanelBuilder().Id(20).Title("Server CPU").
		Description("CPU each server replica uses, in cores (CPU seconds per second).").
		Datasource(datasource()).GridPos(grid(8, y, 8, 8)).
		WithTarget(query("A", `max by (instance) (rate(process_cpu_seconds_total{job="plumbline"}[$__rate_interval]))`, "{{instance}}")).
		Unit("suffix: cores"))
	d.WithPanel(timeseries.NewPanelBuilder().Id(21).Title("Server goroutines").
		Description("Goroutines of each server replica: a count that only grows points at a leak.").
		Datasource(datasource()).GridPos(grid(16, y, 8, 8)).
		WithTarget(query("A", `max by (instance) (go_goroutines{job="plumbline"})`, "{{instance}}")).
		Unit("short"))
	return d
}

// upMappings: 1 up, 0 down.
func upMappings() []dashboard.ValueMapping {
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: map[string]dashboard.ValueMappingResult{
		"0": {Text: cog.ToPtr("down"), Color: cog.ToPtr("red"), Index: cog.ToPtr[int32](0)},
		"1": {Text: cog.ToPtr("up"), Color: cog.ToPtr("green"), Index: cog.ToPtr[int32](1)}}}}}
}

// leaderMappings: 1 leads the loop, 0 stands by.
func leaderMappings() []dashboard.ValueMapping {
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: map[string]dashboard.ValueMappingResult{
		"0": {Text: cog.ToPtr("standby"), Color: cog.ToPtr("transparent"), Index: cog.ToPtr[int32](0)},
		"1": {Text: cog.ToPtr("leader"), Color: cog.ToPtr("green"), Index: cog.ToPtr[int32](1)}}}}}
}
