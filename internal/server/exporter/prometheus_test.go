package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestShardedScrapeConfigWithPrometheus runs a real Prometheus on
// deploy/prometheus/prometheus-sharded.yml — its targets pointed at a
// real listener, its intervals shortened, a token file added — and checks
// that every shard target is up and that Prometheus holds exactly the
// series of the unsharded page: the __param_ labels reach the scrape URL,
// and no series comes from two shards.
func TestShardedScrapeConfigWithPrometheus(t *testing.T) {
	t.Parallel()
	prom := requireTool(t, "prometheus")
	st := openStore(t)
	seed(t, st, shardFleet())
	srv := listen(t, st)
	code, whole := scrapeURL(t, srv.URL+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	want := len(samples(t, whole))

	dir := t.TempDir()
	cfg, shards := shardedConfig(t, filepath.Join("..", "..", "..", "deploy", "prometheus", "prometheus-sharded.yml"),
		strings.TrimPrefix(srv.URL, "http://"), filepath.Join(dir, "token"))
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(shardToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })

	queries := map[string]int{
		`count(up{job="plumbline"} == 1)`:                   shards,
		`count({job="plumbline",__name__=~"plumbline_.+"})`: want,
		`count(count by (instance) (plumbline_agent_up))`:   1,
		`count(plumbline_agent_up{instance=~".*/shard-0"})`: strings.Count(string(whole), "\nplumbline_agent_up{"),
	}
	deadline := time.Now().Add(60 * time.Second)
	for q, n := range queries {
		for {
			got, err := promQuery(addr, q)
			if err == nil && got == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %d (%v), want %d\nprometheus log:\n%s", q, got, err, n, log.String())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// shardedConfig is the example config with every target at addr, 1s
// intervals, the bearer token from tokenFile and no rules or alerting;
// it returns the config and the number of shard targets.
func shardedConfig(t *testing.T, path, addr, tokenFile string) ([]byte, int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "rule_files")
	delete(cfg, "alerting")
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	job := cfg["scrape_configs"].([]any)[0].(map[string]any)
	job["scrape_timeout"] = "1s"
	job["authorization"] = map[string]any{"credentials_file": tokenFile}
	targets := job["static_configs"].([]any)
	for _, tg := range targets {
		tg.(map[string]any)["targets"] = []string{addr}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out, len(targets)
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

// promQuery runs an instant query whose result is one number.
func promQuery(addr, q string) (int, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d results", len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.Atoi(s)
}
