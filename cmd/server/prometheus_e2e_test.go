//go:build linux

package main

import (
	"context"
	"fmt"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	prommodel "github.com/prometheus/common/model"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/lab/loopdev"
)

// TestPrometheusEndToEnd: the server (dev mode, 1s evaluator), one agent
// on two real ext4 volumes — a partition at sector 63 of a loop device
// declared as a RAID 10 of 4 × 64 KiB (misaligned) and one at 1 MiB
// (aligned) — and the Debian prometheus binary scraping /metrics every
// second with deploy/prometheus's rules. Through Prometheus's HTTP API:
// PlumblineVolumeMisaligned is pending or firing for the misaligned mount
// point and not for the aligned one, and the latency histograms of both
// volumes are queryable.
func TestPrometheusEndToEnd(t *testing.T) {
	promBin := requirePrometheus(t)
	loopdev.Require(t, "mkfs.ext4")
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "plumbline.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}

	// Volumes: the misaligned one on the declared array, the aligned one.
	misDev := loopdev.New(t, loopdev.Options{SizeBytes: 1 << 30})
	misPart := loopdev.Partition(t, misDev, "msdos", 63, 0)
	loopdev.Mkfs(t, misPart, "ext4")
	misMount := loopdev.Mount(t, misPart)
	alDev := loopdev.New(t, loopdev.Options{SizeBytes: 1 << 30})
	alPart := loopdev.Partition(t, alDev, "msdos", 2048, 0)
	loopdev.Mkfs(t, alPart, "ext4")
	alMount := loopdev.Mount(t, alPart)

	// The server.
	dataDir := t.TempDir()
	srv := startInProcess(t, "--dev", "--data-dir", dataDir, "--grpc.listen-address", "127.0.0.1:0",
		"--web.listen-address", "127.0.0.1:0", "--baseline.interval", "1s")

	// The agent, configured from the dev agent.yaml: only the two mounts,
	// the array declared, tiny probes every second.
	cfg, err := config.LoadRun(filepath.Join(dataDir, "dev", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Include = config.Selector{MountPoints: []string{misMount, alMount}}
	cfg.DeclaredDevices = []config.DeclaredDevice{{Device: misDev.Path, RAID: config.DeclaredRAID{Level: "raid10", StripeUnit: 64 * bytesize.KiB, Disks: 4}}}
	cfg.Spool.Dir = filepath.Join(t.TempDir(), "spool")
	cfg.Intervals.GeometryRefresh = time.Minute
	cfg.Intervals.Report = 200 * time.Millisecond
	cfg.Web.ListenAddress = ""
	zero := 0.0
	base := cfg.Probes[0] // the dev schedule, with the config's defaults
	cfg.Probes = nil
	for _, mp := range []string{misMount, alMount} {
		dir := filepath.Join(mp, "plumbline-probe")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := base
		p.MountPoint, p.Dir, p.Every, p.MaxDuration, p.Ops, p.IOPS, p.FileSize, p.BusyThreshold, p.Jitter =
			mp, dir, 2*time.Second, time.Second, 20, &zero, 2*bytesize.MiB, &zero, 0
		cfg.Probes = append(cfg.Probes, p)
	}
	if err := cfg.ValidateRun(); err != nil {
		t.Fatal(err)
	}
	tc, id, err := agent.ClientTLS(cfg.Server)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AgentID != "" {
		id = cfg.AgentID
	}
	def := geometry.DefaultOptions()
	def.StatMounts = true
	a, err := agent.New(agent.Options{Config: cfg, AgentID: id, Version: "e2e", Creds: credentials.NewTLS(tc),
		Geometry: cfg.GeometryOptions(def), MountPoll: time.Second, Logger: slog.New(slog.NewTextHandler(&testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); a.Run(agentCtx) }()
	t.Cleanup(func() { stopAgent(); <-agentDone }) // before the unmounts (cleanups run last first)

	// Prometheus.
	promAddr := freeAddr(t)
	promDir := t.TempDir()
	promCfg := filepath.Join(promDir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: plumbline
    static_configs:
      - targets: [%q]
`, rules, srv.webAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	promLog := &syncBuffer{}
	prom := exec.Command(promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(promDir, "data"),
		"--web.listen-address="+promAddr, "--enable-feature=native-histograms")
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	promDone := make(chan struct{})
	go func() { defer close(promDone); prom.Wait() }()
	t.Cleanup(func() {
		prom.Process.Kill()
		<-promDone
		if t.Failed() {
			t.Logf("prometheus log:\n%s", promLog)
		}
	})

	promClient, err := promapi.NewClient(promapi.Config{Address: "http://" + promAddr})
	if err != nil {
		t.Fatal(err)
	}
	api := promv1.NewAPI(promClient)
	deadline := time.Now().Add(50 * time.Second)
	var last string
	for done := false; !done; {
		if time.Now().After(deadline) {
			t.Fatalf("not there in time: %s", last)
		}
		select {
		case <-promDone:
			t.Fatalf("prometheus exited:\n%s", promLog)
		case <-time.After(500 * time.Millisecond):
		}
		// The alert: pending or firing for the misaligned mount point only.
		alerts, err := api.Alerts(context.Background())
		if err != nil {
			last = err.Error()
			continue
		}
		misAlert := false
		for _, al := range alerts.Alerts {
			if al.Labels["alertname"] != "PlumblineVolumeMisaligned" {
				continue
			}
			switch mp := string(al.Labels["mount_point"]); {
			case mp == alMount:
				t.Fatalf("PlumblineVolumeMisaligned %s for the aligned volume %s: %v", al.State, alMount, al.Labels)
			case mp == misMount && (al.State == promv1.AlertStatePending || al.State == promv1.AlertStateFiring):
				misAlert = true
			}
		}
		if !misAlert {
			last = fmt.Sprintf("no PlumblineVolumeMisaligned for %s yet (alerts: %+v)", misMount, alerts.Alerts)
			continue
		}
		// The aligned volume is there, and not misaligned.
		verdicts, err := promQuery(api, fmt.Sprintf(`count by (mount_point) (plumbline_volume_info{mount_point=%q,verdict!="misaligned"})`, alMount))
		if err != nil || verdicts[alMount] != 1 {
			last = fmt.Sprintf("aligned volume %s: %v %v", alMount, verdicts, err)
			continue
		}
		// The latency histograms: a count per volume (native histograms
		// when Prometheus ingests them, the classic _count otherwise) and
		// the fleet's median.
		counts := map[string]float64{}
		for _, q := range []string{`histogram_count(plumbline_probe_latency_seconds)`, `plumbline_probe_latency_seconds_count`} {
			res, err := promQuery(api, `sum by (mount_point) (`+q+`)`)
			if err != nil {
				last = err.Error()
				continue
			}
			for mp, v := range res {
				counts[mp] = max(counts[mp], v)
			}
		}
		if counts[misMount] <= 0 || counts[alMount] <= 0 {
			last = fmt.Sprintf("latency counts by mount point: %v", counts)
			continue
		}
		median := map[string]float64{}
		for _, q := range []string{
			`histogram_quantile(0.5, sum(rate(plumbline_probe_latency_seconds[1m])))`,
			`histogram_quantile(0.5, sum by (le) (rate(plumbline_probe_latency_seconds_bucket[1m])))`,
		} {
			if res, err := promQuery(api, q); err == nil && len(res) > 0 && !math.IsNaN(res[""]) {
				median[q] = res[""]
			}
		}
		if len(median) == 0 {
			last = "no median latency yet"
			continue
		}
		t.Logf("PlumblineVolumeMisaligned for %s, not for %s; latency counts %v; median %v", misMount, alMount, counts, median)
		done = true
	}
}

// requirePrometheus finds the prometheus binary, or skips — except under
// CI=true, where its absence fails the test.
func requirePrometheus(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err == nil {
		return p
	}
	msg := "prometheus not found (Debian: apt-get install prometheus)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promQuery runs an instant query and returns its values by mount_point
// ("" for none).
func promQuery(api promv1.API, q string) (map[string]float64, error) {
	v, _, _, err := api.Query(context.Background(), q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	vec, ok := v.(prommodel.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, want a vector", q, v.Type())
	}
	out := make(map[string]float64, len(vec))
	for _, smp := range vec {
		out[string(smp.Metric["mount_point"])] = float64(smp.Value)
	}
	return out, nil
}

// testWriter logs through t (the agent's log).
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
