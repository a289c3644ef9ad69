//go:build linux

package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	prommodel "github.com/prometheus/common/model"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// legitimatelyEmpty are the panels that have no data with a cmd/fleetsim
// fleet, and why. Every other panel must show data.
var legitimatelyEmpty = map[string]string{
	"plumbline-volume/Degraded since":                      "fleetsim's latencies are steady: no volume degrades",
	"plumbline-volume/md members missing":                  "fleetsim declares hardware RAID; md arrays need sysfs",
	"plumbline-volume/Database regression and attribution": "fleetsim sends no database I/O",
	"plumbline-volume/Database operations per second":      "fleetsim sends no database I/O",
	"plumbline-volume/Not measured":                        "fleetsim sends no database I/O",
	"plumbline-volume/md sync progress":                    "fleetsim declares hardware RAID; md arrays need sysfs",
	"plumbline-volume/md sync speed":                       "fleetsim declares hardware RAID; md arrays need sysfs",
	"plumbline-volume/Slow members on the host":            "fleetsim sends no member I/O",
}

// emptyQueries are queries with no data with a cmd/fleetsim fleet in a
// panel that has data from its others (dashboard/panel/ref), and why.
var emptyQueries = map[string]string{
	"plumbline-volume/Database latency beside the probe's/A": "fleetsim sends no database I/O (the probe's latency beside it, B, has data)",
}

// TestDashboardsAgainstPrometheus runs every panel's queries against real
// Prometheus servers scraping a real Plumbline server that cmd/fleetsim
// feeds: one Prometheus ingesting the classic buckets, one ingesting native
// histograms (--enable-feature=native-histograms; Prometheus 2.x then drops
// the classic buckets of a histogram that has native ones). With the
// template variables set to a misaligned volume of the fleet, every panel
// has data from both, except those in legitimatelyEmpty, and every query
// has data from at least one (no dead query).
func TestDashboardsAgainstPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the server and runs Prometheus")
	}
	promBin := requireTool(t, "prometheus")
	bin := buildCommands(t, "server", "fleetsim")
	// Every wait below polls for its condition within this bound: ~50 s
	// when all is well, 2 to 4 minutes on a 2-core machine at load 20.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	dataDir := t.TempDir()
	grpcAddr, webAddr := freeAddr(t), freeAddr(t)
	stopServer := startProcess(t, "server", filepath.Join(bin, "server"), "--dev", "--data-dir", dataDir,
		"--grpc.listen-address", grpcAddr, "--web.listen-address", webAddr, "--baseline.interval", "1s")
	waitHTTP(t, ctx, "http://"+webAddr+"/metrics")
	refuseUnauthenticated(t, ctx, grpcAddr, filepath.Join(dataDir, "dev"))

	// The rules as deployed, evaluated every second instead of every minute.
	rules, err := os.ReadFile(filepath.Join("prometheus", "plumbline.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(t.TempDir(), "plumbline.rules.yml")
	if err := os.WriteFile(rulesFile, bytes.ReplaceAll(rules, []byte("interval: 1m"), []byte("interval: 1s")), 0o644); err != nil {
		t.Fatal(err)
	}
	proms := map[string]promv1.API{} // mode: its HTTP API
	for _, mode := range []string{"classic", "native"} {
		proms[mode] = startPrometheus(t, promBin, rulesFile, webAddr, mode == "native")
	}

	// The fleet: 100 agents, ~300 volumes over many profiles, ~19 runs per
	// volume and kind (fewer on a loaded machine: settleFleet tops them
	// up): every history trusted (12 runs, the baseline default) and some
	// cohorts of 5 same-profile volumes, so the cohort panels have data.
	metricsURL := "http://" + webAddr + "/metrics"
	fleetStart := time.Now()
	runFleet := func(duration string) {
		fleet := exec.CommandContext(ctx, filepath.Join(bin, "fleetsim"), "--dev-dir", filepath.Join(dataDir, "dev"), "--server", grpcAddr,
			"--agents", "100", "--rate", "700", "--duration", duration, "--progress", "0",
			"--maintenance-every", "10", // every 10th run held back by a maintenance window: the skips panels and the windows' annotation and panel
			"--scan-every", "20") // every hidden-stripe volume stripe-scanned: the measured panels
		if out, err := fleet.CombinedOutput(); err != nil {
			t.Fatalf("fleetsim: %v\n%s", err, out)
		} else {
			t.Logf("fleetsim: %s", bytes.TrimSpace(out))
		}
	}
	runFleet("25s")
	settleFleet(t, ctx, proms, metricsURL, func() { runFleet("8s") })

	for mode, api := range proms {
		if v, _, _, err := api.Query(ctx, `max_over_time(scrape_duration_seconds[1m]) or up == 0`, time.Now()); err == nil {
			t.Logf("%s Prometheus: slowest scrape in the last minute %v s", mode, v)
		}
	}

	dashboards := readDashboards(t)
	vars := fleetVariables(t, ctx, proms["classic"])
	t.Logf("template variables: %v", vars)
	expand := strings.NewReplacer("$__rate_interval", "30s", "$__interval", "5s",
		"$host", promRegex(vars["host"]...), "$profile", promRegex(vars["profile"]...), "$mount_point", promRegex(vars["mount_point"]...))

	// The template variables' own queries offer the chosen values.
	labelValues := regexp.MustCompile(`^label_values\((.*), *([a-z_]+)\)$`)
	for _, d := range dashboards {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("%s: variable %s: definition %q is not label_values(selector, label)", d.UID, v.Name, v.Definition)
				continue
			}
			for mode, api := range proms {
				values, _, _, err := api.LabelValues(ctx, m[2], []string{expand.Replace(m[1])}, time.Time{}, time.Time{})
				if err != nil {
					t.Fatalf("%s: variable %s: %v", d.UID, v.Name, err)
				}
				for _, want := range vars[v.Name] {
					if !slices.Contains(values, prommodel.LabelValue(want)) {
						t.Errorf("%s: variable %s offers %v (%s Prometheus), not the fleet's %s", d.UID, v.Name, values, mode, want)
					}
				}
			}
		}
	}

	// since: an annotation's query, which Grafana runs over the
	// dashboard's time range (a range query from since), not at one instant.
	type query struct {
		dashboard, panel, ref, expr string
		since                       time.Time
	}
	var queries []query
	panels := map[string]bool{}
	for _, d := range dashboards {
		walkPanels(d.Panels, func(p panel) {
			if len(p.Targets) == 0 {
				return
			}
			panels[d.UID+"/"+p.Title] = true
			for _, tg := range p.Targets {
				queries = append(queries, query{d.UID, p.Title, tg.RefID, expand.Replace(tg.Expr), time.Time{}})
			}
		})
		// Annotations: over the fleet's run, as a dashboard showing it.
		for _, a := range d.Annotations.List {
			id := "annotation " + a.Name
			panels[d.UID+"/"+id] = true
			queries = append(queries, query{d.UID, id, "A", expand.Replace(a.Expr), fleetStart})
		}
	}
	for id := range legitimatelyEmpty {
		if !panels[id] {
			t.Errorf("legitimatelyEmpty names %s, which no dashboard has", id)
		}
	}

	// Poll until every panel that should have data has it in both modes
	// (the recording rules evaluate every second after the scrape), then
	// hold the result; what is left of the bound but the time the server
	// alerts need.
	var got map[string]map[query]int // mode: query: series
	var missing []string
	deadline, _ := ctx.Deadline()
	deadline = deadline.Add(-45 * time.Second)
	pollStart := time.Now()
	for {
		got = map[string]map[query]int{}
		for mode, api := range proms {
			got[mode] = map[query]int{}
			for _, q := range queries {
				n, err := instantQuery(ctx, api, q.expr)
				if !q.since.IsZero() {
					n, err = rangeQuery(ctx, api, q.expr, q.since)
				}
				if err != nil {
					t.Fatalf("%s Prometheus, %s / %s / %s: %v", mode, q.dashboard, q.panel, q.ref, err)
				}
				got[mode][q] = n
			}
		}
		missing = missing[:0]
		for id := range panels {
			if _, ok := legitimatelyEmpty[id]; ok {
				continue
			}
			for mode := range proms {
				n := 0
				for _, q := range queries {
					if q.dashboard+"/"+q.panel == id {
						n += got[mode][q]
					}
				}
				if n == 0 {
					missing = append(missing, fmt.Sprintf("%s (%s)", id, mode))
				}
			}
		}
		for _, q := range queries {
			_, emptyQuery := emptyQueries[q.dashboard+"/"+q.panel+"/"+q.ref]
			if _, ok := legitimatelyEmpty[q.dashboard+"/"+q.panel]; !ok && !emptyQuery && got["classic"][q]+got["native"][q] == 0 {
				missing = append(missing, fmt.Sprintf("%s/%s query %s in either mode: %s", q.dashboard, q.panel, q.ref, q.expr))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	t.Logf("panels polled for %s", time.Since(pollStart).Round(time.Millisecond))
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("no data: %s", m)
	}
	for _, q := range queries {
		t.Logf("%-22s %-52s %s: classic %d, native %d series", q.dashboard, q.panel, q.ref, got["classic"][q], got["native"][q])
	}
	checkServerAlerts(t, ctx, proms, stopServer)
	// The panels listed as empty are, with this fleet: a stale entry
	// would hide a panel that now works (or one that broke).
	for id, why := range legitimatelyEmpty {
		for _, q := range queries {
			if q.dashboard+"/"+q.panel == id && got["classic"][q]+got["native"][q] > 0 {
				t.Errorf("%s has data, but legitimatelyEmpty says %q: remove it from the list", id, why)
			}
		}
	}
}

// fleetVariables picks the dashboards' template variables from the fleet
// as the evaluator has settled it, as a user selects two volumes in
// Grafana: two misaligned Linux volumes (their hosts, mount points and
// profiles), one whose stripe-scan measured its split cost (fleetsim's
// hidden-stripe arrays) for the measured panels, one judged against its
// cohort for the cohort panels (fleetsim has no volume with both: a
// measured stripe puts a volume in a profile of its own). Each is the
// first by host and mount point of those that qualify: the same volumes
// every run of the same fleet.
func fleetVariables(t *testing.T, ctx context.Context, api promv1.API) map[string][]string {
	t.Helper()
	const misaligned = `plumbline_volume_info{verdict="misaligned",mount_point=~"/.*"}`
	vars := map[string][]string{}
	for _, q := range []string{
		misaligned + ` and on (host, mount_point) plumbline_volume_measured_split_cost_seconds`,
		misaligned + ` and on (host, mount_point) plumbline_baseline_ratio{reference="cohort"}`,
	} {
		found, err := vectorQuery(ctx, api, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) == 0 {
			all, _ := vectorQuery(ctx, api, misaligned)
			t.Fatalf("none of the %d misaligned Linux volumes of the settled fleet qualifies: %s is empty", len(all), q)
		}
		slices.SortFunc(found, func(a, b *prommodel.Sample) int {
			return strings.Compare(string(a.Metric["host"]+"\x00"+a.Metric["mount_point"]), string(b.Metric["host"]+"\x00"+b.Metric["mount_point"]))
		})
		t.Logf("%d volumes: %s", len(found), q)
		for _, l := range []string{"host", "mount_point", "profile"} {
			if v := string(found[0].Metric[prommodel.LabelName(l)]); !slices.Contains(vars[l], v) {
				vars[l] = append(vars[l], v)
			}
		}
	}
	return vars
}

// promRegex is a variable's values as Grafana puts them into a =~
// matcher: regex metacharacters escaped, several in a (a|b) group, then
// backslashes for the PromQL string.
func promRegex(vs ...string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = regexp.QuoteMeta(v)
	}
	r := strings.Join(q, "|")
	if len(q) > 1 {
		r = "(" + r + ")"
	}
	return strings.ReplaceAll(r, `\`, `\\`)
}

func walkPanels(ps []panel, f func(panel)) {
	for _, p := range ps {
		f(p)
		walkPanels(p.Panels, f)
	}
}

func readDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dashboards: %v (%d files)", err, len(files))
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// buildCommands builds ./cmd/NAME of this module into a temporary
// directory and returns it.
func buildCommands(t *testing.T, names ...string) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal("go toolchain not found to build the server and fleetsim")
		}
	}
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// startProcess starts a command, stopped (and its output logged on
// failure) when the test ends or stop is called.
func startProcess(t *testing.T, name, path string, args ...string) (stop func()) {
	t.Helper()
	var out syncBuffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return stop
}

func startPrometheus(t *testing.T, bin, rulesFile, target string, native bool) promv1.API {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global:
  scrape_interval: 3s
  scrape_timeout: 3s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: plumbline
    static_configs:
      - targets: [%q]
`, rulesFile, target), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}
	name := "prometheus (classic)"
	if native {
		args = append(args, "--enable-feature=native-histograms")
		name = "prometheus (native)"
	}
	startProcess(t, name, bin, args...)
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return promv1.NewAPI(c)
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

func waitHTTP(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not answer 200: %v", u, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// vectorQuery runs q now and returns its instant vector.
func vectorQuery(ctx context.Context, api promv1.API, q string) (prommodel.Vector, error) {
	v, _, _, err := api.Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	vec, ok := v.(prommodel.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, want a vector", q, v.Type())
	}
	return vec, nil
}

// instantQuery runs q now and returns how many series (or 1 for a scalar)
// it gave.
func instantQuery(ctx context.Context, api promv1.API, q string) (int, error) {
	v, _, _, err := api.Query(ctx, q, time.Now())
	if err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	switch v := v.(type) {
	case prommodel.Vector:
		return len(v), nil
	case prommodel.Matrix:
		return len(v), nil
	default: // scalar, string
		return 1, nil
	}
}

// rangeQuery counts the series q returns from since to now, as Grafana
// queries an annotation over a dashboard's time range.
func rangeQuery(ctx context.Context, api promv1.API, q string, since time.Time) (int, error) {
	v, _, _, err := api.QueryRange(ctx, q, promv1.Range{Start: since, End: time.Now(), Step: time.Second})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	if m, ok := v.(prommodel.Matrix); ok {
		return len(m), nil
	}
	return 0, fmt.Errorf("%s: a range query answered %s", q, v.Type())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// serverAlerts are the alerts about the server itself.
const serverAlerts = `PlumblineServerDown|PlumblineEvaluatorStalled|PlumblineInventoryProjectionLagging|PlumblineNoLeader`

// checkServerAlerts: with the server up and its loops running, no alert
// about the server itself is pending or firing in either Prometheus (the
// rules hold against the server's real series: its job, its process start
// time, its loops); once the server stops, PlumblineServerDown is pending
// for it.
func checkServerAlerts(t *testing.T, ctx context.Context, proms map[string]promv1.API, stopServer func()) {
	t.Helper()
	for mode, api := range proms {
		v, err := vectorQuery(ctx, api, `ALERTS{alertname=~"`+serverAlerts+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > 0 {
			t.Errorf("%s Prometheus: the server is up and running, yet %v", mode, v)
		}
	}
	stopServer()
	for mode, api := range proms {
		const down = `ALERTS{alertname="PlumblineServerDown",alertstate="pending",job="plumbline"}`
		deadline := time.Now().Add(30 * time.Second) // a scrape (3 s) that fails, then a rule evaluation (1 s)
		for {
			v, err := vectorQuery(ctx, api, down)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s Prometheus: the server stopped 30 s ago, but %s = %v", mode, down, v)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}
