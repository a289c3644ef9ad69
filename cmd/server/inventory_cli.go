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
	"strings"
	"text/tabwriter"
	"time"
)

// inventoryFilters are the /api/v1/volumes filters the CLI passes on.
var inventoryFilters = []struct{ name, usage string }{
	{"verdict", "aligned, misaligned or unknown"},
	{"host", "hostname, exact or a glob (* ?)"},
	{"mount_point", "mount point, exact or a glob"},
	{"fs", "file-system type (xfs, ext4, ntfs, ...)"},
	{"raid_level", "none, linear, raid0, raid1, raid10, raid5, raid50, raid6, raid60"},
	{"stripe_unit_bytes", "stripe unit in bytes"},
	{"data_offset_bytes", "data offset in bytes (e.g. 32256)"},
	{"media", "hdd-7200, hdd-10k, hdd-15k, sata-ssd, sas-ssd, nvme, unknown"},
	{"profile", "storage profile key"},
	{"min_split_fraction", "predicted split fraction at least this (0-1)"},
	{"io_size_bytes", "the I/O size of --min_split_fraction: 8192 or 65536"},
	{"degraded", "true or false"},
	{"rule", "alignment rule id"},
	{"severity", "critical, warning or info"},
}

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
	for _, f := range inventoryFilters {
		filters[f.name] = fs.String(f.name, "", f.usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	q := url.Values{}
	for name, v := range filters {
		if *v != "" {
			q.Set(name, *v)
		}
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
			off, split := "-", "-"
			if v.Alignment.DataOffsetBytes != nil {
				off = fmt.Sprint(*v.Alignment.DataOffsetBytes)
			}
			if f, ok := v.Alignment.SplitFraction["8192"]; ok {
				split = fmt.Sprintf("%.1f%%", 100*f)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", v.Host, v.MountPoint, v.Alignment.Verdict, off,
				v.Alignment.StripeUnitBytes, split, v.Severity, v.Profile, v.ID)
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
