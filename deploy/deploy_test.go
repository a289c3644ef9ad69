// Package deploy holds no code: its tests check the deployment files —
// Prometheus rules and config, Alertmanager config, Grafana dashboards —
// with the real promtool and amtool.
package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/metricsource"
	"github.com/plumbline/plumbline/internal/selfmetrics"
)

// requireTool finds a binary, or skips — except under CI=true, where a
// missing tool fails the test.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " not found (Debian: apt-get install prometheus prometheus-alertmanager)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

func TestPrometheusRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	run(t, "prometheus", promtool, "check", "rules", "plumbline.rules.yml")
	run(t, "prometheus", promtool, "test", "rules", "plumbline.rules.test.yml")
	run(t, "prometheus", promtool, "check", "config", "prometheus.yml")
	run(t, "prometheus", promtool, "check", "config", "prometheus-sharded.yml")
}

// TestEveryAlertTested: each alert of the rules file has a unit test case
// that expects it to fire and one that expects it quiet.
func TestEveryAlertTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Record string }
		}
	}
	readYAML(t, "prometheus/plumbline.rules.yml", &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	readYAML(t, "prometheus/plumbline.rules.test.yml", &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	want := []string{"PlumblineVolumeMisaligned", "PlumblineVolumeDegraded", "PlumblineVolumeCohortOutlier", "PlumblineAgentDown",
		"PlumblineProbeFailing", "PlumblineGeometryChanged", "PlumblineAllocationUnitNotRecommended", "PlumblineRAIDArrayDegraded",
		"PlumblineStripeUnitDisagrees", "PlumblineAgentCertificateExpiring",
		"PlumblineServerDown", "PlumblineEvaluatorStalled", "PlumblineInventoryProjectionLagging", "PlumblineNoLeader",
		"PlumblineRAIDMemberFailed", "PlumblineRAIDArrayNotRunning", "PlumblineRAIDArrayReadOnly", "PlumblineRAIDRebuilding",
		"PlumblineRAIDMismatches", "PlumblineRAIDMemberErrors"}
	var have []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			have = append(have, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: firing case %v, quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if _, err := os.Stat(filepath.Join("..", "docs", "runbooks", r.Alert+".md")); err != nil {
				t.Errorf("alert %s: no runbook: %v", r.Alert, err)
			}
		}
	}
	for _, a := range want {
		if !slices.Contains(have, a) {
			t.Errorf("rules lack alert %s", a)
		}
	}
}

func TestAlertmanagerConfig(t *testing.T) {
	amtool := requireTool(t, "amtool")
	run(t, "alertmanager", amtool, "check-config", "alertmanager.yml")
}

// TestAlertmanagerRoutes: each alert, at the severity it carries, reaches
// the receiver meant for it (amtool config routes test). A misalignment is
// critical but is not fixed at night: it goes to the ticket queue.
func TestAlertmanagerRoutes(t *testing.T) {
	amtool := requireTool(t, "amtool")
	for _, c := range []struct{ labels, receiver string }{
		{"alertname=PlumblineVolumeMisaligned severity=critical host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineVolumeMisaligned severity=warning host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineAllocationUnitNotRecommended severity=info host=db01 mount_point=/data", "plumbline-digest"},
		{"alertname=PlumblineRAIDArrayDegraded severity=critical host=db01 mount_point=/data device=md0", "plumbline-pager"},
		{"alertname=PlumblineExporterStoreFailing severity=critical instance=s1:9464", "plumbline-pager"},
		{"alertname=PlumblineRAIDMemberFailed severity=critical agent_id=db01 host=db01 mount_point=/data", "plumbline-pager"},
		{"alertname=PlumblineRAIDArrayNotRunning severity=critical agent_id=db01 host=db01 mount_point=/data", "plumbline-pager"},
		{"alertname=PlumblineRAIDRebuilding severity=warning agent_id=db01 host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineRAIDMismatches severity=warning agent_id=db01 host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineVolumeDegraded severity=warning host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineGeometryChanged severity=info host=db01 mount_point=/data", "plumbline-digest"},
		{"alertname=PlumblineStripeUnitDisagrees severity=warning host=db01 mount_point=/data", "plumbline-tickets"},
		{"alertname=PlumblineAgentIdentityConflict severity=warning agent_id=a1 host=db01", "plumbline-tickets"},
		{"alertname=PlumblineServerDown severity=critical instance=s1:9464 job=plumbline", "plumbline-pager"},
		{"alertname=PlumblineEvaluatorStalled severity=warning", "plumbline-tickets"},
		{"alertname=PlumblineInventoryProjectionLagging severity=warning", "plumbline-tickets"},
		{"alertname=PlumblineNoLeader severity=warning loop=evaluator", "plumbline-tickets"},
	} {
		cmd := exec.Command(amtool, append([]string{"config", "routes", "test", "--config.file=alertmanager.yml"}, strings.Fields(c.labels)...)...)
		cmd.Dir = "alertmanager"
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("amtool config routes test %s: %v", c.labels, err)
		}
		if got := strings.TrimSpace(string(out)); got != c.receiver {
			t.Errorf("%s: routed to %s, want %s", c.labels, got, c.receiver)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	for _, f := range []string{"grafana/plumbline-dashboards.yml", "grafana/prometheus-datasource.yml"} {
		var v struct {
			APIVersion int `yaml:"apiVersion"`
		}
		readYAML(t, f, &v)
		if v.APIVersion != 1 {
			t.Errorf("%s: apiVersion %d, want 1", f, v.APIVersion)
		}
	}
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID         string  `json:"uid"`
	Title       string  `json:"title"`
	Panels      []panel `json:"panels"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

var metricName = regexp.MustCompile(`\bplumbline[a-z0-9_:]*`)

// quoted is a PromQL string literal: label values such as job="plumbline"
// name no metric.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// TestDashboards: valid JSON, unique uids and panel ids, the datasource and
// host/profile/mount_point variables, every PromQL expression parses
// (promtool, as recording rules) and names only metrics the server exports
// (the golden exposition) or the rules record.
func TestDashboards(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	if err != nil || len(files) < 3 {
		t.Fatalf("dashboards: %v, %d files, want 3", err, len(files))
	}
	known := exportedNames(t)
	uids := map[string]string{}
	var exprs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Errorf("%s: invalid JSON: %v", f, err)
			continue
		}
		if d.UID == "" || uids[d.UID] != "" {
			t.Errorf("%s: uid %q empty or also in %s", f, d.UID, uids[d.UID])
		}
		uids[d.UID] = f
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
			if v.Definition != "" {
				exprs = append(exprs, strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ", "+v.Name+")"))
			}
		}
		if vars["datasource"] != "datasource" || vars["host"] == "" || vars["profile"] == "" || vars["mount_point"] == "" {
			t.Errorf("%s: variables %v, want datasource, host, profile, mount_point", f, vars)
		}
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] {
					t.Errorf("%s: panel id %d twice", f, p.ID)
				}
				ids[p.ID] = true
				for _, tg := range p.Targets {
					exprs = append(exprs, tg.Expr)
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		for _, a := range d.Annotations.List {
			if a.Expr == "" {
				t.Errorf("%s: annotation %q has no PromQL expression", f, a.Name)
			}
			exprs = append(exprs, a.Expr)
		}
	}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(quoted.ReplaceAllString(e, `""`), -1) {
			if !known[n] {
				t.Errorf("expression %q names %s, which neither /metrics (internal/server/exporter/testdata/metrics.golden) nor the recording rules have", e, n)
			}
		}
	}
	promtool := requireTool(t, "promtool")
	// Substitute the template variables, then let promtool parse every
	// expression as a recording rule.
	repl := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$host", "x", "$profile", "x", "$mount_point", "x")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(repl.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard_expr_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboards.rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ".", promtool, "check", "rules", path)
}

// exportedNames are the metric names of the golden exposition (histogram
// series names included) and the recording rules' names.
func exportedNames(t *testing.T) map[string]bool {
	f, err := os.Open(filepath.Join("..", "internal", "server", "exporter", "testdata", "metrics.golden"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE ") {
			fields := strings.Fields(line)
			known[fields[2]] = true
			if fields[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					known[fields[2]+s] = true
				}
			}
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Record string }
		}
	}
	// The server's own families (loops, admission, enrollment, build
	// info): not in the exporter's golden page, declared in its source.
	own, err := metricsource.Families("..")
	if err != nil {
		t.Fatal(err)
	}
	for n := range own {
		known[n] = true
	}
	known[selfmetrics.Program+"_build_info"] = true
	readYAML(t, filepath.Join("prometheus", "plumbline.rules.yml"), &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = true
			}
		}
	}
	return known
}
