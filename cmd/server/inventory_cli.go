package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/inventory"
	"github.com/plumbline/plumbline/internal/server/inventory/client"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The /api/v1/volumes filters the CLI passes on are the API's own
// (inventory.Filters). Each flag is the query parameter with - for _
// (--data-offset-bytes for data_offset_bytes), like every other flag; the
// parameter's own spelling is accepted too, unlisted, for scripts written
// before. A size filter takes bytes or a size (64KiB, 64k: bytesize).

// flagName is a query parameter's flag: data_offset_bytes -> data-offset-bytes.
func flagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

// unknownCell is what the table shows for a value the server does not know.
const unknownCell = "-"

const inventoryUsage = "usage: server inventory list|summary [--url URL] [--token-file FILE] [filters]\n"

// inventoryArgs are the parsed flags of `server inventory`.
type inventoryArgs struct {
	base, tokenFile, caFile, format, sort string
	// query holds the filters given, as the API's query parameters.
	query url.Values
}

// runInventory is `server inventory list|summary`: a small client of the
// HTTP inventory API.
func runInventory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "summary") {
		fmt.Fprint(stderr, inventoryUsage)
		return 2
	}
	cmd := args[0]
	a, code := parseInventoryArgs(cmd, args[1:], stderr)
	if a == nil {
		return code
	}
	c, err := newAPIClient(a.base, a.tokenFile, a.caFile)
	if err != nil {
		fmt.Fprintf(stderr, "server inventory: %v\n", err)
		return 2
	}
	if cmd == "summary" {
		var out json.RawMessage
		if err := c.Get(ctx, "/api/v1/summary", a.query, &out); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		stdout.Write(append(out, '\n'))
		return 0
	}
	return listVolumes(ctx, c, a, stdout, stderr)
}

// parseInventoryArgs reads the flags of `server inventory cmd`; nil and
// the exit code when there is nothing to run.
func parseInventoryArgs(cmd string, args []string, stderr io.Writer) (*inventoryArgs, int) {
	fs := flag.NewFlagSet("server inventory "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a inventoryArgs
	fs.StringVar(&a.base, "url", "http://"+config.DevWebAddress, "the server's HTTP `URL`")
	fs.StringVar(&a.tokenFile, "token-file", "", "`file` holding an API bearer token (default: $PLUMBLINE_TOKEN)")
	fs.StringVar(&a.caFile, "ca-file", "", "CA `file` (PEM) to verify an https server")
	fs.StringVar(&a.format, "format", "table", "output: table, json or csv (list)")
	fs.StringVar(&a.sort, "sort", "", "sort field, -field for descending (list)")
	filters := map[string]*string{}
	hidden := map[string]bool{}
	for _, f := range inventory.Filters() {
		v := fs.String(flagName(f.Param), "", f.Usage)
		filters[f.Param] = v
		if flagName(f.Param) != f.Param {
			fs.Var(aliasValue{v}, f.Param, "same as --"+flagName(f.Param))
			hidden[f.Param] = true
		}
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), inventoryUsage+"\nflags:\n")
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		shown.SetOutput(fs.Output())
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				shown.Var(f.Value, f.Name, f.Usage)
			}
		})
		shown.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	a.query = url.Values{}
	for _, f := range inventory.Filters() {
		v := *filters[f.Param]
		if v == "" {
			continue
		}
		if f.Size {
			n, err := bytesize.Parse(v)
			if err != nil {
				fmt.Fprintf(stderr, "server inventory: --%s: %v\n", flagName(f.Param), err)
				return nil, 2
			}
			v = strconv.FormatUint(uint64(n), 10)
		}
		a.query.Set(f.Param, v)
	}
	return &a, 0
}

// listVolumes is `server inventory list`: every page of /api/v1/volumes
// as a table or JSON lines, or the CSV streamed.
func listVolumes(ctx context.Context, c *client.Client, a *inventoryArgs, stdout, stderr io.Writer) int {
	q := a.query
	if a.sort != "" {
		q.Set("sort", a.sort)
	}
	switch a.format {
	case "csv":
		q.Set("format", "csv")
		if err := c.Stream(ctx, "/api/v1/volumes", q, stdout); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		return 0
	case "json", "table":
	default:
		fmt.Fprintf(stderr, "server inventory: --format %q: want table, json or csv\n", a.format)
		return 2
	}
	var tw *tabwriter.Writer
	if a.format == "table" {
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tMOUNT POINT\tVERDICT\tOFFSET\tSTRIPE UNIT\tSPLIT "+strings.ToUpper(vocab.IOSizeKey(vocab.IOSize(0)))+
			"\tSPLIT COST\tSEVERITY\tPROFILE\tID")
	}
	q.Set("limit", "1000")
	for {
		var page struct {
			Volumes []json.RawMessage `json:"volumes"`
			Next    string            `json:"next_page_token"`
		}
		if err := c.Get(ctx, "/api/v1/volumes", q, &page); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		for _, raw := range page.Volumes {
			if tw == nil {
				stdout.Write(append(raw, '\n'))
				continue
			}
			fmt.Fprintln(tw, tableRow(raw))
		}
		if page.Next == "" {
			break
		}
		q.Set("next_page_token", page.Next)
	}
	if tw != nil {
		tw.Flush()
	}
	return 0
}

// tableRow is a volume of the API as a row of the list's table: sizes as
// `agent inspect` writes them, unknownCell for what the server does not
// know. A stripe unit the geometry probe inferred says so, with its
// confidence; SPLIT COST is the measured cost of one split I/O.
func tableRow(raw json.RawMessage) string {
	var v struct {
		ID         string `json:"id"`
		Host       string `json:"host"`
		MountPoint string `json:"mount_point"`
		Profile    string `json:"profile"`
		Severity   string `json:"severity"`
		Alignment  struct {
			Verdict          string             `json:"verdict"`
			DataOffsetBytes  *uint64            `json:"data_offset_bytes"`
			StripeUnitBytes  uint64             `json:"stripe_unit_bytes"`
			StripeUnitSource string             `json:"stripe_unit_source"`
			Confidence       float64            `json:"stripe_unit_confidence"`
			SplitFraction    map[string]float64 `json:"split_fraction"`
			SplitCost        *float64           `json:"measured_split_cost_seconds"`
		}
	}
	json.Unmarshal(raw, &v)
	off, stripe, split, cost := unknownCell, unknownCell, unknownCell, unknownCell
	if v.Alignment.DataOffsetBytes != nil {
		off = bytesize.Size(*v.Alignment.DataOffsetBytes).Human()
	}
	if v.Alignment.StripeUnitBytes != 0 {
		stripe = bytesize.Size(v.Alignment.StripeUnitBytes).Human()
		if v.Alignment.StripeUnitSource == align.SourceMeasured {
			// Rounded down, so that 0.996 does not read as certainty.
			stripe += fmt.Sprintf(" (measured, %d%%)", int(math.Floor(100*v.Alignment.Confidence)))
		}
	}
	// SPLIT is the smallest I/O size's (the API's split_fraction keys
	// are decimal bytes).
	if f, ok := v.Alignment.SplitFraction[vocab.IOSizeNames()[0]]; ok {
		split = fmt.Sprintf("%.1f%%", 100*f)
	}
	if c := v.Alignment.SplitCost; c != nil {
		cost = latencyCell(*c)
	}
	return strings.Join([]string{cell(v.Host), cell(v.MountPoint), cell(v.Alignment.Verdict), off,
		stripe, split, cost, cell(v.Severity), cell(v.Profile), v.ID}, "\t")
}

// latencyCell writes seconds in milliseconds (0.81ms), or microseconds
// below 0.1 ms (85µs).
func latencyCell(s float64) string {
	if s < 100e-6 {
		return fmt.Sprintf("%.0fµs", s*1e6)
	}
	return fmt.Sprintf("%.2fms", s*1e3)
}

// cell is s, or the unknown marker when empty.
func cell(s string) string {
	if s == "" {
		return unknownCell
	}
	return s
}

// aliasValue is a second name of a string flag.
type aliasValue struct{ p *string }

func (a aliasValue) String() string {
	if a.p == nil {
		return ""
	}
	return *a.p
}
func (a aliasValue) Set(v string) error { *a.p = v; return nil }

// newAPIClient is the inventory API client the flags ask for: the token
// from --token-file, else $PLUMBLINE_TOKEN; --ca-file's CA for https.
func newAPIClient(base, tokenFile, caFile string) (*client.Client, error) {
	token := os.Getenv("PLUMBLINE_TOKEN")
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(base, client.Options{Token: token, CAFile: caFile})
}
