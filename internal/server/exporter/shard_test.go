package exporter

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/inventory"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

const shardToken = "shard-test-secret"

// shardFleet is the golden fleet and twelve more hosts of three volumes
// each, with a few judged runs on every volume.
func shardFleet() []host {
	fleet := goldenFleet()
	ssd := map[string]time.Duration{"random-read": 180 * time.Microsecond, "random-write": 60 * time.Microsecond, "log-write": 500 * time.Microsecond}
	for i := range 12 {
		h := host{id: fmt.Sprintf("pg%02d", i), hostname: fmt.Sprintf("pg%02d.example.com", i), lastSeen: epoch.Add(-time.Duration(i) * time.Second)}
		for j, v := range []*plumblinev1.Volume{legacyVolume("/data"), nvmeVolume("/wal"), mdVolume("/srv/pg")} {
			if (i+j)%4 == 3 {
				continue // not every host has every volume
			}
			h.volumes = append(h.volumes, v)
			h.runs = append(h.runs, steady(v.GetMountPoint(), epoch.Add(-6*time.Hour), 3, ssd)...)
		}
		fleet = append(fleet, h)
	}
	return fleet
}

// scrapeURL gets url from a real listener with the test's bearer token.
func scrapeURL(t *testing.T, url, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+shardToken)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// listen serves a new collector over st on a real listener, behind the
// server's bearer-token check. Its clock moves a millisecond a read, so the
// records are counted on every scrape.
func listen(t *testing.T, st *store.Store) *httptest.Server {
	t.Helper()
	var ticks atomic.Int64
	c, err := New(st, Options{Now: func() time.Time { return epoch.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }, RecordCountsEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(inventory.RequireToken([]inventory.Token{{Name: "prometheus", Secret: shardToken}}, h))
	t.Cleanup(srv.Close)
	return srv
}

// samples are the sample lines of a text exposition (no comments).
func samples(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// metrics are the metrics of a delimited protobuf exposition, one string
// per metric (family name and the message), for comparing sets.
func metrics(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	r := bufio.NewReader(strings.NewReader(string(body)))
	for {
		mf := &dto.MetricFamily{}
		if err := protodelim.UnmarshalFrom(r, mf); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("decode exposition: %v", err)
		}
		for _, m := range mf.GetMetric() {
			out = append(out, mf.GetName()+" "+m.String())
		}
	}
}

// TestShardsPartitionExposition: over a real listener, for several shard
// counts, the shards' series together are the unsharded exposition's,
// each in exactly one shard, in both formats; the fleet-wide and agent
// series are in shard 0; each volume is in the shard its stable hash
// names, and stays there when the server restarts.
func TestShardsPartitionExposition(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plumbline.db")
	st, err := store.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, st, shardFleet())
	srv := listen(t, st)

	_, whole := scrapeURL(t, srv.URL+"/metrics", "")
	_, wholePB := scrapeURL(t, srv.URL+"/metrics", prometheusAccept)
	want, wantPB := samples(t, whole), metrics(t, wholePB)
	slices.Sort(want)
	slices.Sort(wantPB)
	pages := map[int]shardPage{}
	for _, n := range []int{1, 2, 3, 7, 16} {
		p := scrapeShards(t, srv, n)
		pages[n] = p
		var gotPB []string
		for i := range n {
			gotPB = append(gotPB, metrics(t, p.pb[i])...)
			global := strings.Contains(string(p.text[i]), "plumbline_agent_up{")
			if global != (i == 0) {
				t.Errorf("shards=%d: shard %d carries the agent series: %v, want %v", n, i, global, i == 0)
			}
		}
		slices.Sort(gotPB)
		if diff := cmp.Diff(want, shardSamples(t, p, n)); diff != "" {
			t.Errorf("shards=%d: the shards' text samples are not the whole exposition's, each once (-whole +shards):\n%s", n, diff)
		}
		if diff := cmp.Diff(wantPB, gotPB); diff != "" {
			t.Errorf("shards=%d: the shards' protobuf metrics are not the whole exposition's, each once (-whole +shards):\n%s", n, diff)
		}
	}
	checkShardOf(t, st, pages[7], 7)

	// A restart: a new server over the same store file serves every shard
	// byte for byte as before.
	srv.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := store.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	srv2 := listen(t, st2)
	again := scrapeShards(t, srv2, 7)
	for i := range 7 {
		if string(again.text[i]) != string(pages[7].text[i]) {
			t.Errorf("shard %d of 7 differs after a restart:\n%s", i, cmp.Diff(string(pages[7].text[i]), string(again.text[i])))
		}
	}

	// New runs judged on some volumes: the shards, each brought up to date
	// by its own scrape, are still the whole exposition of a new server.
	walRunsJudged(t, st2, "pg03", "pg07")
	got := shardSamples(t, scrapeShards(t, srv2, 7), 7)
	_, fresh := scrapeURL(t, listen(t, st2).URL+"/metrics", "")
	want = samples(t, fresh)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after an evaluator pass the shards are not a new server's whole exposition (-whole +shards):\n%s", diff)
	}
	if slices.Equal(shardSamples(t, again, 7), got) {
		t.Error("the evaluator pass changed nothing in the shards")
	}
}

// shardPage is the text and protobuf bodies of each shard of a scrape.
type shardPage struct{ text, pb map[int][]byte }

// scrapeShards scrapes every shard of n, in both formats.
func scrapeShards(t *testing.T, srv *httptest.Server, n int) shardPage {
	t.Helper()
	p := shardPage{text: map[int][]byte{}, pb: map[int][]byte{}}
	for i := range n {
		url := fmt.Sprintf("%s/metrics?shard=%d&shards=%d", srv.URL, i, n)
		for accept, into := range map[string]map[int][]byte{"": p.text, prometheusAccept: p.pb} {
			code, body := scrapeURL(t, url, accept)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", url, code, body)
			}
			into[i] = body
		}
	}
	return p
}

// shardSamples are the text samples of the n shards of p, sorted.
func shardSamples(t *testing.T, p shardPage, n int) []string {
	var out []string
	for i := range n {
		out = append(out, samples(t, p.text[i])...)
	}
	slices.Sort(out)
	return out
}

// checkShardOf: each volume's series are in the shard of n ShardOf names.
func checkShardOf(t *testing.T, st *store.Store, p shardPage, n int) {
	t.Helper()
	vols, err := st.ListVolumes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		shard := int(ShardOf(v.AgentID, v.MountPoint) % uint64(n))
		info := fmt.Sprintf(`plumbline_volume_last_probe_timestamp_seconds{agent_id=%q,host=%q,mount_point=%q}`, v.AgentID, v.Hostname, v.MountPoint)
		if !strings.Contains(string(p.text[shard]), info) {
			t.Errorf("%s:%s is not in shard %d of %d", v.AgentID, v.MountPoint, shard, n)
		}
	}
}

// walRunsJudged stores a random-read run of /wal of each agent and lets an
// evaluator pass judge it.
func walRunsJudged(t *testing.T, st *store.Store, agents ...string) {
	t.Helper()
	for _, agent := range agents {
		appendRecords(t, st, agent, store.Record{Kind: store.KindProbe, ProducedAt: epoch, Probe: &store.ProbeResult{
			MountPoint: "/wal", Device: "nvme0n1p1", Kind: "random-read", BlockSizeBytes: 8 * kib, QueueDepth: 1, StartedAt: epoch.Add(-time.Minute),
			Duration: time.Second, Ops: 100, Bytes: 100 * 8 * kib, Histogram: runHistogram(t, 3*time.Millisecond, 100)}})
	}
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestShardOfIsFNV1a: the documented hash, FNV-1a 64 of agent id, NUL,
// mount point, computed here from its definition; a change of hash would
// move volumes between shards (and Prometheus series between targets).
func TestShardOfIsFNV1a(t *testing.T) {
	t.Parallel()
	fnv1a := func(s string) uint64 {
		h := uint64(14695981039346656037)
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		return h
	}
	for _, k := range [][2]string{{"db01", "/data"}, {"db02", "/srv/pg"}, {"", ""}, {"a", "b/c"}, {"ab", "/c"}} {
		if got, want := ShardOf(k[0], k[1]), fnv1a(k[0]+"\x00"+k[1]); got != want {
			t.Errorf("ShardOf(%q, %q) = %#x, want %#x", k[0], k[1], got, want)
		}
	}
	if ShardOf("a", "b/c") == ShardOf("a/b", "c") {
		t.Error("the separator does not keep agent id and mount point apart")
	}
}

// TestShardBadParameters: bad shard parameters get a 400 that says what
// is wanted; the bearer-token check comes first, as for /metrics.
func TestShardBadParameters(t *testing.T) {
	t.Parallel()
	srv := listen(t, openStore(t))
	for _, tc := range []struct{ query, want string }{
		{"shard=1", "shard and shards go together"},
		{"shards=4", "shard and shards go together"},
		{"shard=4&shards=4", `shard="4": want a whole number from 0 to 3`},
		{"shard=-1&shards=4", `shard="-1"`},
		{"shard=x&shards=4", `shard="x"`},
		{"shard=0&shards=0", `shards="0": want a whole number from 1 to 1024`},
		{"shard=0&shards=1025", `shards="1025"`},
		{"shard=0&shards=ten", `shards="ten"`},
		{"shard=0&shard=1&shards=2", "given once"},
	} {
		code, body := scrapeURL(t, srv.URL+"/metrics?"+tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET /metrics?%s: %d %q, want 400 with %q", tc.query, code, body, tc.want)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics?shard=0&shards=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sharded scrape without a token: %d, want 401", resp.StatusCode)
	}
	if code, body := scrapeURL(t, srv.URL+"/metrics?shard=0&shards=1", ""); code != http.StatusOK || !strings.Contains(string(body), "plumbline_exporter_store_success 1") {
		t.Errorf("shard 0 of 1: %d\n%s", code, body)
	}
}

// TestAgentsOfOneHostnameApart: three agents report host name vm, each
// with /: three volumes, each with its own series (agent_id keys them,
// host is a label) in its own agent's shard; one agent's failing probes
// are a series of its volume; when one agent's / goes, only its series go.
func TestAgentsOfOneHostnameApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	ids := []string{"vmA", "vmB", "vmC"}
	var fleet []host
	for _, id := range ids {
		fleet = append(fleet, host{id: id, hostname: "vm", lastSeen: epoch, volumes: []*plumblinev1.Volume{nvmeVolume("/")}})
	}
	seed(t, st, fleet)
	hw, err := st.HighWater(ctx, "vmB", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendBatch(ctx, "vmB", []store.Record{{Sequence: hw + 1, Kind: store.KindProbe, ProducedAt: epoch,
		Probe: &store.ProbeResult{MountPoint: "/", Device: "nvme0n1", Kind: "random-read", BlockSizeBytes: 8 * kib, QueueDepth: 1,
			StartedAt: epoch, Skipped: true, StoppedReason: "refused", Failure: "free space below the floor", Histogram: runHistogram(t, 0, 0)}}}); err != nil {
		t.Fatal(err)
	}
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 8
	srv := listen(t, st)
	shard := func(i int) string {
		code, body := scrapeURL(t, fmt.Sprintf("%s/metrics?shard=%d&shards=%d", srv.URL, i, n), "")
		if code != http.StatusOK {
			t.Fatalf("shard %d: %d %s", i, code, body)
		}
		return string(body)
	}
	info := func(id string) string {
		return fmt.Sprintf(`plumbline_volume_info{agent_id=%q,cluster="4096",data_offset_bytes="",device="/dev/nvme0n1p1",fs="xfs",host="vm",media="nvme",mount_point="/",`, id)
	}
	_, whole := scrapeURL(t, srv.URL+"/metrics", "")
	if got := strings.Count(string(whole), `plumbline_volume_info{`); got != len(ids) {
		t.Errorf("%d plumbline_volume_info series, want %d (one per agent):\n%s", got, len(ids), whole)
	}
	for _, id := range ids {
		if i := int(ShardOf(id, "/") % n); !strings.Contains(shard(i), info(id)) {
			t.Errorf("%s's / is not in its shard %d of %d", id, i, n)
		}
	}
	const failing = `plumbline_probe_failing_since_timestamp_seconds{agent_id="vmB",host="vm",kind="random-read",mount_point="/",reason="refused"}`
	if !strings.Contains(string(whole), failing) {
		t.Errorf("no %s in\n%s", failing, whole)
	}
	// vmA's / goes (its snapshot lists /other instead): vmB's and vmC's stay.
	hw, err = st.HighWater(ctx, "vmA", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendBatch(ctx, "vmA", []store.Record{{Sequence: hw + 1, Kind: store.KindGeometry, ProducedAt: epoch,
		Volumes: []store.Volume{storeVolume(t, nvmeVolume("/other"))}}}); err != nil {
		t.Fatal(err)
	}
	if got := shard(int(ShardOf("vmA", "/") % n)); strings.Contains(got, info("vmA")) {
		t.Errorf("vmA's gone / is still shown:\n%s", got)
	}
	for _, id := range ids[1:] {
		if got := shard(int(ShardOf(id, "/") % n)); !strings.Contains(got, info(id)) {
			t.Errorf("%s's / is gone with vmA's:\n%s", id, got)
		}
	}
}

// TestShardsAfterEvaluatorPass: with the server's evaluator wired in, the
// shards scraped one after another after a pass (the later ones reuse
// the pass's stop counts, failing streaks, cohorts and run counts) are
// together a new collector's whole exposition.
func TestShardsAfterEvaluatorPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	seed(t, st, shardFleet())
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ticks atomic.Int64
	opts := Options{Now: func() time.Time { return epoch.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }, RecordCountsEvery: time.Nanosecond,
		Evaluator: evaluatorStatus(ev)}
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	union := func() []string {
		var out []string
		for _, i := range []int{2, 1, 0} {
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/metrics?shard=%d&shards=%d", i, n), nil))
			out = append(out, samples(t, rec.Body.Bytes())...)
		}
		slices.Sort(out)
		return out
	}
	whole := func() []string {
		fresh, err := New(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		out := samples(t, get(t, fresh, "", "").Body.Bytes())
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff(whole(), union()); diff != "" {
		t.Fatalf("seeded: shards differ from the whole exposition (-whole +shards):\n%s", diff)
	}
	// New runs on three volumes, one of them stopped (a stop count), and a pass.
	for i, agent := range []string{"pg01", "pg05", "pg09"} {
		hw, err := st.HighWater(ctx, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		p := &store.ProbeResult{MountPoint: "/data", Device: "sdb1", Kind: "log-write", BlockSizeBytes: 8 * kib, QueueDepth: 1,
			StartedAt: epoch.Add(-time.Minute), Duration: time.Second, Ops: 100, Bytes: 100 * 8 * kib, Histogram: runHistogram(t, 9*time.Millisecond, 100)}
		if i == 1 {
			p.StoppedReason = "latency-ceiling"
		}
		if _, err := st.AppendBatch(ctx, agent, []store.Record{{Sequence: hw + 1, Kind: store.KindProbe, ProducedAt: epoch, Probe: p}}); err != nil {
			t.Fatal(err)
		}
	}
	before := union()
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	after, want := union(), whole()
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("after a pass: shards differ from the whole exposition (-whole +shards):\n%s", diff)
	}
	if slices.Equal(before, after) {
		t.Error("the pass changed nothing in the shards")
	}
}
