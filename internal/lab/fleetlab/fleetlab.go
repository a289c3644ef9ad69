//go:build linux

// Package fleetlab runs the whole product on lab arrays: emulated arrays
// from `raidlab up`, each partitioned at 1 MiB, formatted ext4 and
// mounted; `server --dev`; the real `agent run` probing every array on a
// schedule; and the Debian prometheus scraping the server with the
// project's alert rules. A test or a benchmark then injects faults with
// `raidlab fault` and watches Prometheus' alerts.
//
// It drives the built binaries (server, agent, raidlab) as processes and
// shells out to parted, partx, mkfs.ext4, mount and umount: it is test and
// benchmark code, never imported by the agent or the server.
package fleetlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	prommodel "github.com/prometheus/common/model"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/lab/labproc"
)

// Array is one lab array to build.
type Array struct {
	Level      string // raidlab level: single, raid0, raid1, raid5, raid10
	Disks      int
	StripeUnit string // raidlab size, e.g. 64KiB; empty for raid1 and single
	Size       string // e.g. 8GiB (the agent refuses a probe file below 5 GiB free)
	Preset     string // raidlab preset: sas15k, sata7k, ssd, nvme, fast
	// SlowFromStart slows member 0 by this factor before the agent starts
	// (0: healthy): a volume that was always slow.
	SlowFromStart float64
	// Hidden: the array is not declared to the agent, like a hardware RAID
	// that reports no stripe: only the geometry probe can find its unit.
	Hidden bool
	// PartitionStart is where the partition starts, in parted's units
	// (default 1MiB; 63s is the 31.5 KiB of Windows Server 2003).
	PartitionStart string
}

// Binaries are the built commands; without Prometheus, Start starts none.
type Binaries struct {
	Server, Agent, Raidlab, Prometheus string
}

// Plan is a stack to start.
type Plan struct {
	Bin    Binaries
	Dir    string // work directory (mounts, data, spool, Prometheus), created
	Arrays []Array
	// The agent's probe schedule for every array (every, ops; file size).
	Every    time.Duration
	Ops      int
	FileSize string // probe file size, e.g. 64MiB or 1GiB
	// ScanEvery, when set, adds a geometry probe schedule (stripe-scan,
	// 2,000 reads, uncapped, the same probe file) to every array.
	ScanEvery time.Duration
	// BusyThreshold is the agent's busy guard (percent; 0 off).
	BusyThreshold float64
	// ReportInterval is the agent's intervals.report.
	ReportInterval time.Duration
	// BaselineInterval is the server's --baseline.interval.
	BaselineInterval time.Duration
	// Scrape is Prometheus' scrape and rule evaluation interval.
	Scrape time.Duration
	// Rules is the rules file Prometheus loads.
	Rules string
	Log   io.Writer
	// BeforeAgent, when set, runs once the arrays are mounted and the
	// server is up, before the agent starts (e.g. databases put on the
	// arrays); the YAML it returns is appended to the agent's
	// configuration (top-level keys, e.g. databases).
	BeforeAgent func(ctx context.Context, s *Stack) (agentYAML string, err error)
	// BeforeClose, when set, runs in Close once the processes are
	// stopped, before the arrays are unmounted (what BeforeAgent put on
	// them stops first).
	BeforeClose func()
}

// Stack is a running plan.
type Stack struct {
	plan     Plan
	labRoot  string
	Devices  []string // loop devices, by array
	Mounts   []string // mount points, by array
	WebAddr  string   // the server's HTTP listener
	PromAddr string

	procs    labproc.Group // server, agent, Prometheus: os.Interrupt, SIGKILL after 15 s
	noProbes bool          // the agent runs without probes (RestartAgent)
}

func (s *Stack) logf(format string, args ...any) {
	if s.plan.Log != nil {
		fmt.Fprintf(s.plan.Log, "fleetlab: "+format+"\n", args...)
	}
}

// Start builds the arrays and starts the server, the agent and Prometheus.
// On error everything started is stopped again. Close stops it all.
func Start(ctx context.Context, plan Plan) (_ *Stack, err error) {
	if err := os.MkdirAll(plan.Dir, 0o755); err != nil {
		return nil, err
	}
	s := &Stack{plan: plan, labRoot: filepath.Join(plan.Dir, "raidlab")}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for i, a := range plan.Arrays {
		dev, mnt, err := s.buildArray(ctx, i, a)
		if err != nil {
			return s, fmt.Errorf("array %d: %w", i, err)
		}
		s.Devices, s.Mounts = append(s.Devices, dev), append(s.Mounts, mnt)
		if a.SlowFromStart > 0 {
			if err := s.Fault(ctx, i, "slow", "--member", "0", "--factor", fmt.Sprint(a.SlowFromStart)); err != nil {
				return s, err
			}
		}
	}
	if err := s.startServer(ctx); err != nil {
		return s, err
	}
	var extra string
	if plan.BeforeAgent != nil {
		if extra, err = plan.BeforeAgent(ctx, s); err != nil {
			return s, err
		}
	}
	if err := s.startAgent(ctx, extra); err != nil {
		return s, err
	}
	if plan.Bin.Prometheus == "" {
		return s, nil
	}
	if err := s.startPrometheus(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func (s *Stack) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "PLUMBLINE_RAIDLAB_ROOT="+s.labRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func (s *Stack) buildArray(ctx context.Context, i int, a Array) (dev, mnt string, err error) {
	args := []string{"up", "--level", a.Level, "--disks", fmt.Sprint(a.Disks), "--size", a.Size, "--preset", a.Preset}
	if a.StripeUnit != "" {
		args = append(args, "--stripe-unit", a.StripeUnit)
	}
	out, err := s.run(ctx, s.plan.Bin.Raidlab, args...)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	dev = strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(dev, "/dev/loop") {
		return "", "", fmt.Errorf("raidlab up: last line %q is not a loop device", dev)
	}
	s.logf("array %d: %s %s × %d %s on %s", i, a.Level, a.Preset, a.Disks, a.StripeUnit, dev)
	start := a.PartitionStart
	if start == "" {
		start = "1MiB"
	}
	if _, err := s.run(ctx, "parted", "-s", "-a", "none", dev, "mklabel", "gpt", "mkpart", "p", "ext4", start, "100%"); err != nil {
		return dev, "", err
	}
	if _, err := s.run(ctx, "partx", "-u", dev); err != nil {
		return dev, "", err
	}
	part := dev + "p1"
	for range 50 {
		if _, err := os.Stat(part); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.run(ctx, "mkfs.ext4", "-q", "-F", part); err != nil {
		return dev, "", err
	}
	mnt = filepath.Join(s.plan.Dir, "mnt", fmt.Sprintf("lab%d", i))
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return dev, "", err
	}
	// noinit_itable: no background inode-table zeroing under the probes.
	if _, err := s.run(ctx, "mount", "-o", "noinit_itable", part, mnt); err != nil {
		return dev, "", err
	}
	return dev, mnt, os.MkdirAll(filepath.Join(mnt, "probe"), 0o755)
}

// Fault runs `raidlab fault DEV args...` on array i.
func (s *Stack) Fault(ctx context.Context, i int, args ...string) error {
	_, err := s.run(ctx, s.plan.Bin.Raidlab, append([]string{"fault", s.Devices[i]}, args...)...)
	if err == nil {
		s.logf("array %d (%s): fault %s", i, s.Devices[i], strings.Join(args, " "))
	}
	return err
}

var httpLine = regexp.MustCompile(`HTTP:\s+http://(\S+)/api/v1/volumes`)

func (s *Stack) startServer(ctx context.Context) error {
	data := filepath.Join(s.plan.Dir, "server")
	cmd := exec.Command(s.plan.Bin.Server, "--dev", "--data-dir", data, "--grpc.listen-address", "127.0.0.1:0",
		"--web.listen-address", "127.0.0.1:0", "--baseline.interval", s.plan.BaselineInterval.String(), "--log.level", "warn")
	_, m, err := s.procs.StartReady(ctx, "server", cmd, httpLine, 30*time.Second)
	if err != nil {
		return err
	}
	s.WebAddr = m[1]
	s.logf("server: HTTP %s, data %s", s.WebAddr, data)
	return nil
}

func (s *Stack) startAgent(ctx context.Context, extra string) error {
	dev, err := config.LoadRun(filepath.Join(s.plan.Dir, "server", "dev", "agent.yaml"))
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  address: %q\n  tls:\n    ca_file: %q\n    cert_file: %q\n    key_file: %q\n    server_name: localhost\n",
		dev.Server.Address, dev.Server.TLS.CAFile, dev.Server.TLS.CertFile, dev.Server.TLS.KeyFile)
	fmt.Fprintf(&b, "spool:\n  dir: %q\nintervals:\n  report: %s\n", filepath.Join(s.plan.Dir, "spool"), s.plan.ReportInterval)
	b.WriteString("include:\n  mount_points:\n")
	for _, m := range s.Mounts {
		fmt.Fprintf(&b, "    - %q\n", m)
	}
	b.WriteString("declared_devices:\n")
	for i, a := range s.plan.Arrays {
		if a.Level == "single" || a.Hidden {
			continue // one disk, or a hidden stripe: nothing to declare
		}
		fmt.Fprintf(&b, "  - device: %q\n    raid: {level: %s, disks: %d", s.Devices[i], a.Level, a.Disks)
		if a.StripeUnit != "" {
			fmt.Fprintf(&b, ", stripe_unit: %s", a.StripeUnit)
		}
		b.WriteString("}\n")
	}
	b.WriteString("probes:\n")
	if s.noProbes {
		b.WriteString("  []\n")
	}
	for _, m := range s.Mounts {
		if s.noProbes {
			break
		}
		fmt.Fprintf(&b, "  - mount_point: %q\n    dir: %q\n", m, filepath.Join(m, "probe"))
		if s.plan.Every > 0 {
			fmt.Fprintf(&b, "    every: %s\n    max_duration: %s\n", s.plan.Every, min(s.plan.Every, time.Minute))
		}
		if s.plan.Ops > 0 {
			fmt.Fprintf(&b, "    ops: %d\n", s.plan.Ops)
		}
		if s.plan.FileSize != "" {
			fmt.Fprintf(&b, "    file_size: %s\n", s.plan.FileSize)
		}
		fmt.Fprintf(&b, "    busy_threshold: %g\n", s.plan.BusyThreshold)
		if s.plan.ScanEvery > 0 {
			fmt.Fprintf(&b, "  - mount_point: %q\n    dir: %q\n    kinds: [stripe-scan]\n    every: %s\n    max_duration: %s\n    ops: 2000\n    iops: 0\n    busy_threshold: 0\n",
				m, filepath.Join(m, "probe"), s.plan.ScanEvery, s.plan.ScanEvery)
			if s.plan.FileSize != "" {
				fmt.Fprintf(&b, "    file_size: %s\n", s.plan.FileSize)
			}
		}
	}
	b.WriteString(extra)
	path := filepath.Join(s.plan.Dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	if _, err := s.run(ctx, s.plan.Bin.Agent, "run", "--config", path, "--check"); err != nil {
		return err
	}
	_, err = s.procs.Start("agent", exec.Command(s.plan.Bin.Agent, "run", "--config", path))
	s.logf("agent: %s", path)
	return err
}

func (s *Stack) startPrometheus(ctx context.Context) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.PromAddr = l.Addr().String()
	l.Close()
	dir := filepath.Join(s.plan.Dir, "prometheus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rules, err := filepath.Abs(s.plan.Rules)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\nrule_files: [%q]\nscrape_configs:\n  - job_name: plumbline\n    static_configs:\n      - targets: [%q]\n",
		s.plan.Scrape, s.plan.Scrape, s.plan.Scrape, rules, s.WebAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	p, err := s.procs.Start("prometheus", exec.Command(s.plan.Bin.Prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+s.PromAddr))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.Alerts(ctx); err == nil {
			s.logf("prometheus: %s", s.PromAddr)
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("prometheus exited: %s", p.Output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready in 30s: %s", p.Output())
		}
	}
}

// Logs returns every process's output so far (the last MiB of each).
func (s *Stack) Logs() string { return s.procs.Logs() }

// Exited names a process that has stopped, if any.
func (s *Stack) Exited() string {
	if p := s.procs.Exited(); p != nil {
		return p.Name()
	}
	return ""
}

// Close stops the processes (agent first), unmounts and removes the
// arrays. It is safe to call more than once.
func (s *Stack) Close() error {
	s.procs.Close()
	if s.plan.BeforeClose != nil {
		s.plan.BeforeClose()
	}
	var errs []error
	ctx := context.Background()
	for i, dev := range s.Devices {
		if i < len(s.Mounts) {
			s.run(ctx, "umount", s.Mounts[i])
		}
		if _, err := s.run(ctx, s.plan.Bin.Raidlab, "down", dev); err != nil {
			errs = append(errs, err)
		}
	}
	s.Devices = nil
	s.run(ctx, s.plan.Bin.Raidlab, "reap")
	return errors.Join(errs...)
}

// PromAlert is one alert of Prometheus' /api/v1/alerts.
type PromAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"` // pending, firing
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// Alerts returns Prometheus' active alerts.
func (s *Stack) Alerts(ctx context.Context) ([]PromAlert, error) {
	api, err := s.prom()
	if err != nil {
		return nil, err
	}
	res, err := api.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("prometheus alerts: %w", err)
	}
	out := make([]PromAlert, 0, len(res.Alerts))
	for _, a := range res.Alerts {
		labels := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			labels[string(k)] = string(v)
		}
		out = append(out, PromAlert{Labels: labels, State: string(a.State), ActiveAt: a.ActiveAt, Value: a.Value})
	}
	return out, nil
}

// Query runs an instant PromQL query and returns each series' value keyed
// by the label named key.
func (s *Stack) Query(ctx context.Context, q, key string) (map[string]float64, error) {
	api, err := s.prom()
	if err != nil {
		return nil, err
	}
	v, _, _, err := api.Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("prometheus query %s: %w", q, err)
	}
	vec, ok := v.(prommodel.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus query %s: a %s, want a vector", q, v.Type())
	}
	out := make(map[string]float64, len(vec))
	for _, smp := range vec {
		out[string(smp.Metric[prommodel.LabelName(key)])] = float64(smp.Value)
	}
	return out, nil
}

// prom is a client of the stack's Prometheus HTTP API.
func (s *Stack) prom() (promv1.API, error) {
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + s.PromAddr})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(c), nil
}

// TightenRules rewrites a rules file's `for:` durations, alert by alert
// (alert name → duration), for a test that cannot wait minutes or hours.
func TightenRules(src, dst string, forOf map[string]time.Duration) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	current := ""
	done := map[string]bool{}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(t, "- alert: "); ok {
			current = name
			continue
		}
		if strings.HasPrefix(t, "for: ") {
			if d, ok := forOf[current]; ok {
				lines[i] = l[:strings.Index(l, "for:")] + "for: " + model(d)
				done[current] = true
			}
		}
	}
	for name := range forOf {
		if !done[name] {
			return fmt.Errorf("%s: no `for:` of alert %s", src, name)
		}
	}
	return os.WriteFile(dst, []byte(strings.Join(lines, "\n")), 0o644)
}

// model formats d as a Prometheus duration (whole seconds).
func model(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }
