package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lintDashboard is the part of a dashboard the lint rules read.
type lintDashboard struct {
	Title      string      `json:"title"`
	Editable   bool        `json:"editable"`
	Panels     []lintPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
			Refresh    int    `json:"refresh"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type lintPanel struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Format     string `json:"format"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Options struct {
		YAxis struct {
			Unit string `json:"unit"`
		} `json:"yAxis"`
	} `json:"options"`
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			ExcludeByName map[string]bool   `json:"excludeByName"`
			RenameByName  map[string]string `json:"renameByName"`
		} `json:"options"`
	} `json:"transformations"`
	Panels []lintPanel `json:"panels"`
}

// lintUnits are the Grafana unit ids the dashboards may use (Bps: bytes per
// second, an md sync speed).
var lintUnits = []string{"s", "ms", "µs", "ns", "percentunit", "percent", "bytes", "short", "none", "dateTimeAsIso", "ops", "reqps", "Bps"}

var (
	rangeSelector = regexp.MustCompile(`\[[^\]]*\]`)
	counterMetric = regexp.MustCompile(`\bplumbline_[a-z0-9_]*_total\b`)
)

// TestDashboardLint applies the rules of grafana/dashboard-linter (whose
// module the Go proxy does not serve here; see README) to every dashboard,
// minus the exclusions dashboards/.lint gives reasons for:
// template-datasource, template-on-time-change-reload, panel-datasource,
// panel-title-description, panel-units, panel-no-targets,
// target-rate-interval, target-counter-agg, uneditable-dashboard (the
// PromQL of targets and label_values templates is parsed by promtool in
// TestDashboards: target-promql, template-label-promql).
func TestDashboardLint(t *testing.T) {
	var cfg struct {
		Exclusions map[string]any `yaml:"exclusions"`
	}
	readYAML(t, filepath.Join("..", "dashboards", ".lint"), &cfg)
	for rule, v := range cfg.Exclusions {
		if m, _ := v.(map[string]any); m == nil || m["reason"] == nil || m["reason"] == "" {
			t.Errorf("dashboards/.lint excludes %s without a reason", rule)
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dashboards: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d lintDashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range lintDashboardProblems(d) {
			if _, ok := cfg.Exclusions[p.rule]; !ok {
				t.Errorf("%s: %s: %s", filepath.Base(f), p.rule, p.msg)
			}
		}
	}
}

type lintProblem struct{ rule, msg string }

func lintDashboardProblems(d lintDashboard) []lintProblem {
	var out []lintProblem
	add := func(rule, format string, args ...any) {
		out = append(out, lintProblem{rule, fmt.Sprintf(format, args...)})
	}
	if d.Editable {
		add("uneditable-dashboard", "dashboard is editable (provisioned dashboards are changed in the repository)")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			if v.Name == "datasource" && v.Query == "prometheus" {
				hasDS = true
			}
		case "query":
			if v.Refresh != 2 {
				add("template-on-time-change-reload", "variable %s: refresh %d, want 2 (on time range change)", v.Name, v.Refresh)
			}
			if v.Datasource == nil || !isDSVar(v.Datasource.UID) {
				add("template-datasource-rule", "variable %s does not use the datasource variable", v.Name)
			}
		}
	}
	if !hasDS {
		add("template-datasource-rule", "no Prometheus datasource variable named datasource")
	}
	var walk func([]lintPanel)
	walk = func(ps []lintPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if p.Title == "" || p.Description == "" {
				add("panel-title-description-rule", "panel %q: title and description required", p.Title)
			}
			if p.Datasource == nil || !isDSVar(p.Datasource.UID) {
				add("panel-datasource-rule", "panel %q does not use the datasource variable", p.Title)
			}
			if len(p.Targets) == 0 {
				add("panel-no-targets-rule", "panel %q has no target", p.Title)
			}
			units := []string{p.FieldConfig.Defaults.Unit}
			for _, o := range p.FieldConfig.Overrides {
				for _, pr := range o.Properties {
					if pr.ID == "unit" {
						u, _ := pr.Value.(string)
						units = append(units, u)
					}
				}
			}
			switch p.Type {
			case "timeseries", "stat", "gauge", "bargauge", "piechart", "heatmap":
				if units[0] == "" {
					add("panel-units-rule", "panel %q (%s) has no unit", p.Title, p.Type)
				}
			}
			if p.Type == "heatmap" && p.Options.YAxis.Unit == "" {
				add("panel-units-rule", "heatmap %q has no y-axis unit", p.Title)
			}
			for _, u := range units {
				if u != "" && !slices.Contains(lintUnits, u) && !strings.HasPrefix(u, "suffix:") {
					add("panel-units-rule", "panel %q: unit %q is not one of %v or suffix:…", p.Title, u, lintUnits)
				}
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || !isDSVar(tg.Datasource.UID) {
					add("panel-datasource-rule", "panel %q target %s does not use the datasource variable", p.Title, tg.RefID)
				}
				for _, r := range rangeSelector.FindAllString(tg.Expr, -1) {
					if r != "[$__rate_interval]" {
						add("target-rate-interval-rule", "panel %q target %s: range %s, want [$__rate_interval]", p.Title, tg.RefID, r)
					}
				}
				for _, loc := range counterMetric.FindAllStringIndex(tg.Expr, -1) {
					before := strings.TrimRight(tg.Expr[:loc[0]], " ")
					if !strings.HasSuffix(before, "rate(") && !strings.HasSuffix(before, "increase(") {
						add("target-counter-agg-rule", "panel %q target %s: counter %s not inside rate, irate or increase", p.Title, tg.RefID, tg.Expr[loc[0]:loc[1]])
					}
				}
				if p.Type == "heatmap" && tg.Format != "heatmap" {
					add("plumbline-heatmap-format", "heatmap %q target %s: format %q, want heatmap (buckets by le, not series)", p.Title, tg.RefID, tg.Format)
				}
			}
		}
	}
	walk(d.Panels)
	tableColumns(d.Panels, add)
	return out
}

func isDSVar(uid string) bool { return uid == "${datasource}" || uid == "$datasource" }

// tableColumns (Plumbline's own rule, plumbline-table-columns): a table's
// value columns — "Value" of one query, "Value #A", "Value #B"… of several —
// are hidden or renamed to what they hold (an organize transformation),
// and a renamed one has a unit (0.125 is 12.5% of I/Os split; 65536 is
// 64 KiB), so no table shows Value #A or a bare fraction.
func tableColumns(ps []lintPanel, add func(rule, format string, args ...any)) {
	for _, p := range ps {
		tableColumns(p.Panels, add)
		if p.Type != "table" {
			continue
		}
		exclude, rename := map[string]bool{}, map[string]string{}
		for _, tr := range p.Transformations {
			if tr.ID == "organize" {
				maps.Copy(exclude, tr.Options.ExcludeByName)
				maps.Copy(rename, tr.Options.RenameByName)
			}
		}
		unitOf := map[string]bool{}
		for _, o := range p.FieldConfig.Overrides {
			for _, pr := range o.Properties {
				if pr.ID == "unit" && o.Matcher.ID == "byName" {
					unitOf[o.Matcher.Options] = true
				}
			}
		}
		for _, tg := range p.Targets {
			col := "Value"
			if len(p.Targets) > 1 {
				col = "Value #" + tg.RefID
			}
			switch {
			case exclude[col]:
			case rename[col] == "":
				add("plumbline-table-columns", "table %q: column %s (query %s) is neither hidden nor renamed", p.Title, col, tg.RefID)
			case !unitOf[rename[col]] && p.FieldConfig.Defaults.Unit == "":
				add("plumbline-table-columns", "table %q: column %q has no unit", p.Title, rename[col])
			}
		}
		if !exclude["Time"] {
			add("plumbline-table-columns", "table %q: the instant query's Time column is shown", p.Title)
		}
	}
}
