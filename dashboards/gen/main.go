// Command gen writes Plumbline's Grafana dashboards (dashboards/*.json)
// from the Go below, with Grafana's Foundation SDK: panels, queries,
// variables and transformations are typed builders, so a dashboard is
// correct by construction as far as Grafana's schema goes. Run it as
// `make dashboards` (go run ./dashboards/gen -dir dashboards); the JSON
// stays committed, and TestDashboardsCurrent fails when it is stale.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// dashboards are the generated files by name.
var dashboards = map[string]func() *dashboard.DashboardBuilder{
	"alignment-inventory.json": alignmentInventory,
	"fleet-overview.json":      fleetOverview,
	"volume-detail.json":       volumeDetail,
}

func main() { os.Exit(run()) }

func run() int {
	dir := flag.String("dir", "dashboards", "directory to write the dashboards to")
	flag.Parse()
	for name, build := range dashboards {
		b, err := render(build())
		if err == nil {
			err = os.WriteFile(filepath.Join(*dir, name), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: %s: %v\n", name, err)
			return 1
		}
	}
	return 0
}

// render builds a dashboard and encodes it as the committed file holds it:
// indented by two spaces, HTML characters unescaped, a final newline.
func render(b *dashboard.DashboardBuilder) ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
