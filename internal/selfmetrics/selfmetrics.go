// Package selfmetrics is what every Plumbline binary says about itself on
// its /metrics, the way Prometheus's own exporters do:
// plumbline_build_info (client_golang's version collector: version,
// revision, branch, goversion, goos, goarch, tags), the process collector
// (process_*: CPU, memory, open files, start time) and the Go runtime
// collector (go_*: goroutines, GC, memory classes).
package selfmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
)

// Program is the prefix of the build-info metric: plumbline_build_info.
const Program = "plumbline"

// Collectors are the build-info, process and Go runtime collectors of a
// binary of the given version (its -X main.version; the revision, and
// the version when empty, come from the Go build information).
func Collectors(version string) []prometheus.Collector {
	var opts []versioncollector.Option
	if version != "" {
		opts = append(opts, versioncollector.WithExtraConstLabels(prometheus.Labels{"version": version}))
	}
	return []prometheus.Collector{
		versioncollector.NewCollector(Program, opts...),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	}
}

// Register registers Collectors(version) with reg.
func Register(reg prometheus.Registerer, version string) error {
	for _, c := range Collectors(version) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
