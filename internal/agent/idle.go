package agent

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/vocab"
)

// An unedited configuration activates nothing invented: no probe
// schedule, declared array, maintenance window or label. What the agent
// is not doing it says, once at start and again when the central policy
// changes it (idle.go), and in its metrics (configCollector).

// notConfigured is one thing the effective configuration leaves off.
type notConfigured struct {
	key string // the configuration key that turns it on
	msg string // what its absence means and how to turn it on
}

// unconfigured lists what the effective configuration e leaves off, in a
// fixed order.
func unconfigured(e *effective) []notConfigured {
	var out []notConfigured
	if len(e.cfg.Probes) == 0 {
		out = append(out, notConfigured{"probes", "no probe schedule: the agent reports geometry only and measures no latency; " +
			"add probes: (mount_point, dir, kinds, every) to the configuration, or a central policy, to measure it"})
	}
	if len(e.cfg.DeclaredDevices) == 0 {
		out = append(out, notConfigured{"declared_devices", "no declared arrays: hardware RAID under a volume (which the OS cannot see) reads as unknown RAID; " +
			"add declared_devices: (device, raid: level, stripe_unit, disks) to describe it"})
	}
	if e.windows.Len() == 0 {
		out = append(out, notConfigured{"maintenance_windows", "no maintenance windows: probes may run at any time; " +
			"add maintenance_windows: (name, schedule, duration, time_zone) to pause them"})
	}
	if len(e.cfg.Labels) == 0 {
		out = append(out, notConfigured{"labels", "no labels: central policies select this host only by its host name (and its join token's labels); " +
			"add labels: (e.g. role: postgres) to describe it"})
	}
	return out
}

// NotConfigured lists the keys of what the configuration file cfg turns
// on that it leaves off (probes, declared_devices, maintenance_windows,
// labels), before any central policy: `agent run --check` says them.
func NotConfigured(cfg config.Agent) []string {
	e, err := newEffective(cfg, nil)
	if err != nil {
		return nil
	}
	var keys []string
	for _, n := range unconfigured(e) {
		keys = append(keys, n.key)
	}
	return keys
}

// logUnconfigured logs one INFO line for each thing e leaves off (at
// start).
func (a *Agent) logUnconfigured(e *effective) {
	for _, n := range unconfigured(e) {
		a.log.Info(n.msg, "key", n.key)
	}
}

// logUnconfiguredChange logs what a new effective configuration turned
// on or left off compared with the old one (a central policy change).
func (a *Agent) logUnconfiguredChange(old, e *effective) {
	was, now := unconfigured(old), unconfigured(e)
	has := func(l []notConfigured, key string) bool {
		return slices.ContainsFunc(l, func(n notConfigured) bool { return n.key == key })
	}
	for _, n := range now {
		if !has(was, n.key) {
			a.log.Info(n.msg, "key", n.key)
		}
	}
	for _, n := range was {
		if !has(now, n.key) {
			a.log.Info("now configured", "key", n.key, "origin", e.origins[n.key])
		}
	}
}

// configCollector exposes, at scrape time, what the effective
// configuration turns on: probe schedules per kind, declared arrays,
// maintenance windows and labels (0: not configured).
type configCollector struct {
	a                                  *Agent
	schedules, arrays, windows, labels *prometheus.Desc
}

func newConfigCollector(a *Agent) *configCollector {
	const ns = "plumbline_agent_"
	return &configCollector{a: a,
		schedules: prometheus.NewDesc(ns+"probe_schedules", "Probe schedules of the effective configuration that run each kind (0 for every kind: the agent reports geometry only).", []string{"kind"}, nil),
		arrays:    prometheus.NewDesc(ns+"declared_arrays", "Hardware arrays declared in the effective configuration (declared_devices; 0: RAID the OS cannot see reads as unknown).", nil, nil),
		windows:   prometheus.NewDesc(ns+"maintenance_windows", "Maintenance windows of the effective configuration (0: probes may run at any time).", nil, nil),
		labels:    prometheus.NewDesc(ns+"labels", "Labels in the agent's configuration (0: central policies select it by host name and join-token labels only).", nil, nil),
	}
}

func (c *configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.schedules
	ch <- c.arrays
	ch <- c.windows
	ch <- c.labels
}

func (c *configCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.a.eff.Load()
	for _, k := range vocab.ProbeKinds() {
		n := 0
		for _, p := range e.cfg.Probes {
			kinds := p.Kinds
			if len(kinds) == 0 {
				kinds = vocab.DefaultProbeKinds()
			}
			if slices.Contains(kinds, k) {
				n++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.schedules, prometheus.GaugeValue, float64(n), string(k))
	}
	ch <- prometheus.MustNewConstMetric(c.arrays, prometheus.GaugeValue, float64(len(e.cfg.DeclaredDevices)))
	ch <- prometheus.MustNewConstMetric(c.windows, prometheus.GaugeValue, float64(e.windows.Len()))
	ch <- prometheus.MustNewConstMetric(c.labels, prometheus.GaugeValue, float64(len(e.cfg.Labels)))
}
