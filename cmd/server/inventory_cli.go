package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
)

// inventoryFilters are the /api/v1/volumes filters the CLI passes on.
// Each flag is the query parameter with - for _ (--data-offset-bytes for
// data_offset_bytes), like every other flag; the parameter's own spelling
// is accepted too, unlisted, for scripts written before. A size filter
// takes bytes or a size (64KiB, 64k: bytesize).
var inventoryFilters = []struct {
	param, usage string
	size         bool
}{
	{"verdict", "aligned, misaligned or unknown", false},
	{"host", "hostname, exact or a glob (* ?)", false},
	{"mount_point", "mount point, exact or a glob", false},
	{"fs", "file-system type (xfs, ext4, ntfs, ...)", false},
	{"raid_level", "none, linear, raid0, raid1, raid10, raid5, raid50, raid6, raid60", false},
	{"stripe_unit_bytes", "stripe unit, bytes or a size (64KiB)", true},
	{"data_offset_bytes", "data offset, bytes or a size (32256, 1MiB)", true},
	{"media", "hdd-7200, hdd-10k, hdd-15k, sata-ssd, sas-ssd, nvme, unknown", false},
	{"profile", "storage profile key", false},
	{"min_split_fraction", "predicted split fraction at least this (0-1)", false},
	{"io_size_bytes", "the I/O size of --min-split-fraction: 8KiB or 64KiB", true},
	{"degraded", "true or false", false},
	{"rule", "alignment rule id", false},
	{"severity", "critical, warning or info", false},
}

// flagName is a query parameter's flag: data_offset_bytes -> data-offset-bytes.
func flagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

// unknownCell is what the table shows for a value the server does not know.
const unknownCell = "-"

// runInventory is `server inventory list|summary`: a small client of the
// HTTP inventory API.
func runInventory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := "usage: server inventory list|summary [--url URL] [--token-file FILE] [filters]\n"
	if len(args) == 0 || (args[0] != "list" && args[0] != "summary") {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("server inventory "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://"+devWebAddress, "the server's HTTP `URL`")
	tokenFile := fs.String("token-file", "", "`file` holding an API bearer token (default: $PLUMBLINE_TOKEN)")
	caFile := fs.String("ca-file", "", "CA `file` (PEM) to verify an https server")
	format := fs.String("format", "table", "output: table, json or csv (list)")
	sort := fs.String("sort", "", "sort field, -field for descending (list)")
	filters := map[string]*string{}
	hidden := map[string]bool{}
	for _, f := range inventoryFilters {
		v := fs.String(flagName(f.param), "", f.usage)
		filters[f.param] = v
		if flagName(f.param) != f.param {
			fs.Var(aliasValue{v}, f.param, "same as --"+flagName(f.param))
			hidden[f.param] = true
		}
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+"\nflags:\n")
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		shown.SetOutput(fs.Output())
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				shown.Var(f.Value, f.Name, f.Usage)
			}
		})
		shown.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	q := url.Values{}
	for _, f := range inventoryFilters {
		v := *filters[f.param]
		if v == "" {
			continue
		}
		if f.size {
			n, err := bytesize.Parse(v)
			if err != nil {
				fmt.Fprintf(stderr, "server inventory: --%s: %v\n", flagName(f.param), err)
				return 2
			}
			v = strconv.FormatUint(uint64(n), 10)
		}
		q.Set(f.param, v)
	}
	c, err := newAPIClient(*base, *tokenFile, *caFile)
	if err != nil {
		fmt.Fprintf(stderr, "server inventory: %v\n", err)
		return 2
	}
	if cmd == "summary" {
		var out json.RawMessage
		if err := c.get(ctx, "/api/v1/summary", q, &out); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		stdout.Write(append(out, '\n'))
		return 0
	}
	if *sort != "" {
		q.Set("sort", *sort)
	}
	switch *format {
	case "csv":
		q.Set("format", "csv")
		if err := c.stream(ctx, "/api/v1/volumes", q, stdout); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		return 0
	case "json", "table":
	default:
		fmt.Fprintf(stderr, "server inventory: --format %q: want table, json or csv\n", *format)
		return 2
	}
	var tw *tabwriter.Writer
	if *format == "table" {
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tMOUNT POINT\tVERDICT\tOFFSET\tSTRIPE UNIT\tSPLIT 8K\tSEVERITY\tPROFILE\tID")
	}
	q.Set("limit", "1000")
	for {
		var page struct {
			Volumes []json.RawMessage `json:"volumes"`
			Next    string            `json:"next_page_token"`
		}
		if err := c.get(ctx, "/api/v1/volumes", q, &page); err != nil {
			fmt.Fprintf(stderr, "server inventory: %v\n", err)
			return 1
		}
		for _, raw := range page.Volumes {
			if tw == nil {
				stdout.Write(append(raw, '\n'))
				continue
			}
			var v struct {
				ID, Host, MountPoint, Profile, Severity string
				Alignment                               struct {
					Verdict         string             `json:"verdict"`
					DataOffsetBytes *uint64            `json:"data_offset_bytes"`
					StripeUnitBytes uint64             `json:"stripe_unit_bytes"`
					SplitFraction   map[string]float64 `json:"split_fraction"`
				}
			}
			json.Unmarshal(raw, &v)
			var m map[string]any
			json.Unmarshal(raw, &m)
			v.Host, _ = m["host"].(string)
			v.MountPoint, _ = m["mount_point"].(string)
			v.ID, _ = m["id"].(string)
			v.Profile, _ = m["profile"].(string)
			v.Severity, _ = m["severity"].(string)
			off, stripe, split := unknownCell, unknownCell, unknownCell
			if v.Alignment.DataOffsetBytes != nil {
				off = bytesize.Size(*v.Alignment.DataOffsetBytes).Human()
			}
			if v.Alignment.StripeUnitBytes != 0 {
				stripe = bytesize.Size(v.Alignment.StripeUnitBytes).Human()
			}
			if f, ok := v.Alignment.SplitFraction["8192"]; ok {
				split = fmt.Sprintf("%.1f%%", 100*f)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(v.Host), cell(v.MountPoint), cell(v.Alignment.Verdict), off,
				stripe, split, cell(v.Severity), cell(v.Profile), v.ID)
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

type apiClient struct {
	base  string
	token string
	hc    *http.Client
}

func newAPIClient(base, tokenFile, caFile string) (*apiClient, error) {
	c := &apiClient{base: strings.TrimSuffix(base, "/"), token: os.Getenv("PLUMBLINE_TOKEN"),
		hc: &http.Client{Timeout: 5 * time.Minute}}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		c.token = strings.TrimSpace(string(b))
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
		c.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

func (c *apiClient) do(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct {
			Error   string   `json:"error"`
			Allowed []string `json:"allowed"`
		}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		if len(e.Allowed) > 0 {
			return nil, fmt.Errorf("%s: %s: %s (allowed: %s)", path, resp.Status, e.Error, strings.Join(e.Allowed, ", "))
		}
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, e.Error)
	}
	return resp, nil
}

func (c *apiClient) get(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *apiClient) stream(ctx context.Context, path string, q url.Values, w io.Writer) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
