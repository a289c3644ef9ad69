package exporter

import (
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/plumbline/plumbline/internal/vocab"
)

// family is one metric family, described once: its name, help, type and
// label names. Families are numbered in name order (the order of the
// exposition), and each metric's labels are built in label-name order, as
// the registry's normalization would leave them.
type family struct {
	name, help string
	typ        dto.MetricType
	labels     []string // as callers pass the values
	order      []int    // order[i]: index into labels of the i-th label by name
	labelNames []string // labels by name
	textHeader []byte   // # HELP and # TYPE lines
	pbHeader   []byte   // MetricFamily name, help and type fields
}

// Families, in name order.
const (
	famAgentCertExpiry = iota
	famAgentCertIssued
	famAgentConflicts
	famAgentLast
	famAgentQuotaRefusals
	famAgentRecordsRejected
	famAgentStoredToday
	famAgentUp
	famDegradedSince
	famRatio
	famCohortMedian
	famCohortVolumes
	famDBLatency
	famDBNotMeasured
	famDBRate
	famDBRegression
	famEvalFailures
	famEvalLast
	famEvalRuns
	famStoreSuccess
	famIngestRecords
	famFailingSince
	famLatency
	famStops
	famRAIDMemberSlow
	famVolFinding
	famVolGranSplit
	famVolInfo
	famVolLastProbe
	famVolMeasuredCost
	famVolRAIDMissing
	famVolRAIDSyncProgress
	famVolRAIDSyncSpeed
	famVolSplit
	famVolStripeConfidence
	famVolumes
	numFamilies
)

// volumeLabels name a volume in every per-volume series: its agent (the
// key: two agents reporting one host name never merge) and, as labels,
// its host name and mount point.
var volumeLabels = []string{"agent_id", "host", "mount_point"}

func withVolume(extra ...string) []string {
	return append(append([]string{}, volumeLabels...), extra...)
}

var (
	gauge   = dto.MetricType_GAUGE
	counter = dto.MetricType_COUNTER
	histog  = dto.MetricType_HISTOGRAM
)

func newFamilies() [numFamilies]family {
	const ns = "plumbline_"
	var fs [numFamilies]family
	d := func(i int, name string, typ dto.MetricType, help string, labels []string) {
		f := family{name: ns + name, help: help, typ: typ, labels: labels}
		f.order = make([]int, len(labels))
		for j := range f.order {
			f.order[j] = j
		}
		slices.SortFunc(f.order, func(a, b int) int { return cmpString(labels[a], labels[b]) })
		for _, j := range f.order {
			f.labelNames = append(f.labelNames, labels[j])
		}
		f.headers()
		fs[i] = f
	}
	defineVolumeFamilies(d)
	defineFleetFamilies(d)
	return fs // TestFamiliesInNameOrder holds the numbering to name order
}

// defineFamily names family i: its name (without the namespace), type,
// help and labels.
type defineFamily func(i int, name string, typ dto.MetricType, help string, labels []string)

// defineVolumeFamilies defines the per-volume families.
func defineVolumeFamilies(d defineFamily) {
	verdicts, severities := strings.Join(vocab.Verdicts(), ", "), strings.Join(vocab.Severities(), ", ")
	stopReasons := strings.Join(vocab.StopReasons(), ", ")
	d(famVolInfo, "volume_info", gauge, "A volume the latest geometry snapshot of its host lists, with its identity, geometry and the server's alignment verdict ("+verdicts+") as labels. Sizes are bytes; data_offset_bytes is empty when unknown, cluster (the file-system allocation unit) when unknown.",
		withVolume("device", "fs", "raid_level", "stripe_unit_bytes", "data_offset_bytes", "cluster", "media", "profile", "verdict"))
	d(famVolSplit, "volume_split_fraction", gauge, "Offset-caused split: predicted share of I/Os of io_size_bytes that straddle a stripe unit because of where the volume's data starts, beyond what an aligned offset would split (split-I/O model; 0 to 1; 0 when aligned). Re-creating the partition at an aligned offset removes it. Absent when no stripe unit or offset is known.",
		withVolume("io_size_bytes"))
	d(famVolGranSplit, "volume_granularity_split_fraction", gauge, "Allocation-granularity split: predicted share of I/Os of io_size_bytes that straddle a stripe unit at any offset, because the file system places them on a grid finer than their size (allocation unit or stripe hint below the I/O size). Not a misalignment; no re-partitioning removes it (0 to 1). Absent when no stripe unit or offset is known.",
		withVolume("io_size_bytes"))
	d(famVolMeasuredCost, "volume_measured_split_cost_seconds", gauge, "Measured cost of one split I/O: the extra latency of an 8 KiB read that straddles a boundary of the judged stripe unit, as the geometry probe (stripe-scan) timed it on the striped device. Times the predicted split (volume_split_fraction + volume_granularity_split_fraction) it is the measured penalty per I/O. Present only when a measurement of the judged stripe unit exists.",
		volumeLabels)
	d(famVolStripeConfidence, "volume_stripe_unit_confidence", gauge, "Confidence (0 to 1) of the geometry probe's stripe-unit measurement behind the verdict: of the inferred unit when stripe_unit_source is measured, else of the measurement that confirmed or contradicted the unit from stripe_unit_source. Present only when there is one.",
		withVolume("stripe_unit_source"))
	d(famVolFinding, "volume_finding", gauge, "A finding of the server's rules on the volume, on alignment or md RAID health (rule id, severity: "+severities+"); always 1.",
		withVolume("rule", "severity"))
	d(famVolRAIDMissing, "volume_raid_missing_members", gauge, "Members an md array under the volume lacks: the kernel's raid_disks minus the roles an in-sync member fills (a member md failed but still lists counts as missing), or, when the agent sent no md health, minus the member devices sysfs lists. 0 for a complete array.",
		withVolume("device"))
	d(famVolRAIDSyncProgress, "volume_raid_sync_progress_ratio", gauge, "Share done (0 to 1) of the sync action an md array under the volume runs (action: resync, recover, reshape, check, repair), from md/sync_completed in the volume's latest geometry snapshot. Present only while an action runs and md states its progress.",
		withVolume("device", "action"))
	d(famVolRAIDSyncSpeed, "volume_raid_sync_speed_bytes_per_second", gauge, "Speed of the sync action an md array under the volume runs (md/sync_speed in the volume's latest geometry snapshot). Present only while an action runs and md states its speed; with volume_raid_sync_progress_ratio it gives the time left.",
		withVolume("device", "action"))
	d(famVolLastProbe, "volume_last_probe_timestamp_seconds", gauge, "When the volume's last probe run that completed operations started (Unix time), over all probe kinds.",
		volumeLabels)
	d(famLatency, "probe_latency_seconds", histog, "Latency of every probe operation on the volume, by probe kind ("+strings.Join(vocab.JudgedProbeKindNames(), ", ")+"), cumulative over every judged run. Classic buckets and schema-3 native buckets.",
		withVolume("kind"))
	d(famRatio, "baseline_ratio", gauge, "The last run against a reference, by signal: against the history (the volume's own rolling median of the signal) the run's median, p99 and mean latency and its rate shortfall (IOPS cap over achieved IOPS), signal median, p99, mean, rate; against the cohort (the median of volumes of the same profile) or the prior (the profile's expected band, while the cohort is too small) the median only.",
		withVolume("kind", "reference", "signal"))
	d(famDegradedSince, "baseline_degraded_since_timestamp_seconds", gauge, "Present while the volume is degraded for the probe kind: when the sustained shift began (Unix time), against which reference, and on which signal (median, p99, mean; slow: the pooled count of slow ops above the volume's own history, no ratio series; rate: throttled, the median steady).",
		withVolume("kind", "reference", "signal"))
	d(famStops, "probe_stops_total", counter, "Probe runs of any kind skipped or stopped before their op budget, by reason ("+stopReasons+"; skipped: a skipped run that gave none).",
		withVolume("reason"))
	d(famRAIDMemberSlow, "raid_member_slow_ratio", gauge, "Present while the server's sibling judge names the member slow: its mean await in direction (read, write) over the median of its siblings' in the same group (array: the md array, mirror, logical volume or multipath device; kind: "+strings.Join(vocab.MemberGroupKindNames(), ", ")+") doing the same work, in the last interval judged. member is the kernel's device name, by_id its first /dev/disk/by-id name and serial its serial as sysfs states them (empty when the host has none). One series per named member, none otherwise.",
		[]string{"agent_id", "host", "array", "kind", "member", "by_id", "serial", "direction"})
}

// defineFleetFamilies defines the per-agent, fleet, database and server
// families.
func defineFleetFamilies(d defineFamily) {
	d(famAgentConflicts, "agent_identity_conflicts_total", counter, "Times two live agents were seen on this agent identity (an agent spool incarnation that a newer one had replaced spoke again: two hosts sharing one certificate, or a copied spool). Present only for agents with at least one.",
		[]string{"agent_id", "host"})
	d(famFailingSince, "probe_failing_since_timestamp_seconds", gauge, "Present while the volume's latest runs of the probe kind never ran because the agent refused them (reason refused: free-space floor, unsafe path, foreign file, no cache bypass) or failed to open, create or fill the probe file (reason failed): when the first of those runs started (Unix time). Gone once a run does I/O again. The agent's message is in the inventory API and the agent's log.",
		withVolume("kind", "reason"))
	d(famAgentCertExpiry, "agent_client_certificate_expiry_timestamp_seconds", gauge, "When the client certificate the agent presented at its last connection expires (Unix time; the agent's own /metrics has the same gauge, unlabelled). Agents renew at two thirds of the lifetime, and every connection after a renewal presents the new one. Absent for agents without a certificate (insecure mode).",
		[]string{"agent_id", "host"})
	d(famAgentCertIssued, "agent_client_certificate_issued_timestamp_seconds", gauge, "When the client certificate the agent presented at its last connection became valid (Unix time, its NotBefore): with the expiry, its lifetime. Absent for agents without a certificate.",
		[]string{"agent_id", "host"})
	d(famAgentLast, "agent_last_report_timestamp_seconds", gauge, "When the agent last registered or sent a report (Unix time).",
		[]string{"agent_id", "host"})
	d(famAgentQuotaRefusals, "agent_quota_refusals_total", counter, "Report batches of the agent refused because it was over its storage quota (grpc.quota.max_bytes_per_day) or its record-rate quota (grpc.quota.records_per_second): nothing of them was stored, and the agent keeps them in its spool and sends them again. Present only for agents with at least one.",
		[]string{"agent_id", "host"})
	d(famAgentRecordsRejected, "agent_records_rejected_total", counter, "Records of the agent the server refused as invalid (the agent logs each reason; the server keeps only the sequence and a short reason). Present only for agents with at least one.",
		[]string{"agent_id", "host"})
	d(famAgentStoredToday, "agent_stored_today_bytes", gauge, "What the agent's records stored today (UTC day) cost against its storage quota (grpc.quota.max_bytes_per_day): the records, rejection reasons and 128 bytes a row. Present only for agents that stored something today.",
		[]string{"agent_id", "host"})
	d(famAgentUp, "agent_up", gauge, "1 while the agent is connected to a server replica or reported within the down threshold (agents.down_after), else 0: an idle agent (no probe schedule, a maintenance window) is up while its connection is open.",
		[]string{"agent_id", "host"})
	d(famVolumes, "volumes", gauge, "Present volumes by verdict and profile.",
		[]string{"verdict", "profile"})
	d(famCohortVolumes, "cohort_volumes", gauge, "Volumes with a trusted history in the cohort of a profile and probe kind.",
		[]string{"profile", "kind"})
	d(famCohortMedian, "cohort_median_latency_seconds", gauge, "Median of the cohort's per-volume median latencies.",
		[]string{"profile", "kind"})
	d(famIngestRecords, "ingest_records_total", counter, "Records stored by the server, by kind (geometry, probe, member-io, database, rejected).",
		[]string{"kind"})
	d(famDBLatency, "database_latency_seconds", gauge, "The database's own latency of an operation on the volume, as it counts it (PostgreSQL pg_stat_io, pg_stat_wal, pg_stat_database; MySQL and MariaDB performance_schema): the time its operations took over their count (Δtime/Δops) in the agent's last interval, by source (the agent's name for the database) and op ("+strings.Join(vocab.DatabaseOpNames(), ", ")+"). Absent while the database does not time the op (plumbline_database_not_measured) or counted none. Present only on volumes holding database files.",
		withVolume("source", "op"))
	d(famDBNotMeasured, "database_not_measured", gauge, "1 while the database counts an operation on the volume but does not time it (track_io_timing or track_wal_io_timing off, performance_schema timers off): its latency is not measured — never 0. The inventory API says why.",
		withVolume("source", "op"))
	d(famDBRate, "database_operations_per_second", gauge, "Operations the database counted on the volume per second over the agent's last interval, by source and op.",
		withVolume("source", "op"))
	d(famDBRegression, "database_regression_ratio", gauge, "Present while the database's latency of an operation on the volume is degraded against its own history (sustained, like the probe's baseline): the last interval's latency over the history's median, with the attribution of the regression from the probe's view of the same volume ("+strings.Join(vocab.AttributionNames(), ", ")+").",
		withVolume("source", "op", "attribution"))
	d(famEvalLast, "evaluator_last_success_timestamp_seconds", gauge, "When the baseline evaluator last finished a pass without error (Unix time).", nil)
	d(famEvalRuns, "evaluator_runs_total", counter, "Probe runs the baseline evaluator judged since the server started.", nil)
	d(famEvalFailures, "evaluator_failures_total", counter, "Baseline evaluator passes that failed since the server started.", nil)
	d(famStoreSuccess, "exporter_store_success", gauge, "1 when this scrape read the store, 0 when it failed (and no store metrics were sent).", nil)

}
