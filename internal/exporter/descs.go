package exporter

import "github.com/prometheus/client_golang/prometheus"

// descs are the exporter's descriptors, built once.
type descs struct {
	volInfo, volSplit, volFinding, volRAIDMissing, lastProbe *prometheus.Desc
	latency, ratio, degradedSince, stops                     *prometheus.Desc
	agentLast, agentUp                                       *prometheus.Desc
	volumes, cohortVolumes, cohortMedian, ingestRecords      *prometheus.Desc
	evalLast, evalRuns, evalFailures, storeSuccess           *prometheus.Desc
}

var volumeLabels = []string{"host", "mount_point"}

func withVolume(extra ...string) []string {
	return append(append([]string{}, volumeLabels...), extra...)
}

func newDescs() descs {
	const ns = "plumbline_"
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(ns+name, help, labels, nil)
	}
	return descs{
		volInfo: d("volume_info", "A volume the latest geometry snapshot of its host lists, with its identity, geometry and the server's alignment verdict (aligned, misaligned, unknown) as labels. Sizes are bytes; data_offset_bytes is empty when unknown, cluster (the file-system allocation unit) when unknown.",
			withVolume("device", "fs", "raid_level", "stripe_unit_bytes", "data_offset_bytes", "cluster", "media", "profile", "verdict")),
		volSplit: d("volume_split_fraction", "Predicted share of I/Os of io_size_bytes that straddle a stripe unit and are split by the array (split-I/O model; 0 to 1). Absent when no stripe unit is known.",
			withVolume("io_size_bytes")),
		volFinding: d("volume_finding", "An alignment finding of the server's rules on the volume (rule id, severity: critical, warning, info); always 1.",
			withVolume("rule", "severity")),
		volRAIDMissing: d("volume_raid_missing_members", "Members an md array under the volume lacks: the kernel's raid_disks minus the member devices sysfs lists. 0 for a complete array.",
			withVolume("device")),
		lastProbe: d("volume_last_probe_timestamp_seconds", "When the volume's last probe run that completed operations started (Unix time), over all probe kinds.",
			volumeLabels),
		latency: d("probe_latency_seconds", "Latency of every probe operation on the volume, by probe kind (random-read, random-write: 8 KiB QD1 O_DIRECT; log-write: synced sequential writes), cumulative over every judged run. Classic buckets and schema-3 native buckets.",
			withVolume("kind")),
		ratio: d("baseline_ratio", "The last run's median latency over a reference: history (the volume's own rolling median), cohort (the median of volumes of the same profile) or prior (the profile's expected band, while the cohort is too small).",
			withVolume("kind", "reference")),
		degradedSince: d("baseline_degraded_since_timestamp_seconds", "Present while the volume is degraded for the probe kind: when the sustained shift began (Unix time), and against which reference.",
			withVolume("kind", "reference")),
		stops: d("probe_stops_total", "Probe runs of any kind skipped or stopped before their op budget, by reason (busy, busy-during, latency-ceiling, max-duration, interrupted, io-errors, skipped).",
			withVolume("reason")),
		agentLast: d("agent_last_report_timestamp_seconds", "When the agent last registered or sent a report (Unix time).",
			[]string{"agent_id", "host"}),
		agentUp: d("agent_up", "1 when the agent reported within the stale threshold, else 0.",
			[]string{"agent_id", "host"}),
		volumes: d("volumes", "Present volumes by verdict and profile.",
			[]string{"verdict", "profile"}),
		cohortVolumes: d("cohort_volumes", "Volumes with a trusted history in the cohort of a profile and probe kind.",
			[]string{"profile", "kind"}),
		cohortMedian: d("cohort_median_latency_seconds", "Median of the cohort's per-volume median latencies.",
			[]string{"profile", "kind"}),
		ingestRecords: d("ingest_records_total", "Records stored by the server, by kind (geometry, probe, rejected).",
			[]string{"kind"}),
		evalLast:     d("evaluator_last_success_timestamp_seconds", "When the baseline evaluator last finished a pass without error (Unix time).", nil),
		evalRuns:     d("evaluator_runs_total", "Probe runs the baseline evaluator judged since the server started.", nil),
		evalFailures: d("evaluator_failures_total", "Baseline evaluator passes that failed since the server started.", nil),
		storeSuccess: d("exporter_store_success", "1 when this scrape read the store, 0 when it failed (and no store metrics were sent).", nil),
	}
}

func (d descs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.volInfo, d.volSplit, d.volFinding, d.volRAIDMissing, d.lastProbe,
		d.latency, d.ratio, d.degradedSince, d.stops, d.agentLast, d.agentUp,
		d.volumes, d.cohortVolumes, d.cohortMedian, d.ingestRecords,
		d.evalLast, d.evalRuns, d.evalFailures, d.storeSuccess}
}
