package exporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/judgetest"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// appendRecords stores recs as the agent's next records, numbered on from
// its high-water mark, as ingest does.
func appendRecords(t testing.TB, st *store.Store, agent string, recs ...store.Record) {
	t.Helper()
	ctx := context.Background()
	hw, err := st.HighWater(ctx, agent, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i].Sequence = hw + 1 + uint64(i)
	}
	if _, err := st.AppendBatch(ctx, agent, recs); err != nil {
		t.Fatal(err)
	}
}

// snapshotRecord is a geometry snapshot of vols, each judged as ingest
// judges it.
func snapshotRecord(t testing.TB, vols ...*plumblinev1.Volume) store.Record {
	g := store.Record{Kind: store.KindGeometry, ProducedAt: epoch}
	for _, v := range vols {
		g.Volumes = append(g.Volumes, storeVolume(t, v))
	}
	return g
}

// newRuns are three random-read runs of db01's /new, a minute apart.
func newRuns(t testing.TB) []store.Record {
	var recs []store.Record
	for i := range 3 {
		recs = append(recs, store.Record{Kind: store.KindProbe, ProducedAt: epoch, Probe: &store.ProbeResult{
			MountPoint: "/new", Device: "nvme1n1", Kind: "random-read", BlockSizeBytes: 8 * kib, QueueDepth: 1, StartedAt: epoch.Add(time.Duration(i) * time.Minute),
			Duration: time.Second, Ops: 100, Bytes: 100 * 8 * kib, Histogram: runHistogram(t, 100*time.Microsecond, 100)}})
	}
	return recs
}

// setHistoryRatio rewrites the history ratio of an agent's baselines of
// one kind behind the evaluator's back.
func setHistoryRatio(t testing.TB, st *store.Store, agent, kind string, ratio float64) {
	t.Helper()
	ctx := context.Background()
	rows, err := st.ListProbeBaselines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var changed []store.ProbeBaseline
	for _, r := range rows {
		if r.AgentID == agent && r.Kind == kind {
			r.HistoryRatio = ratio
			changed = append(changed, r)
		}
	}
	if err := st.SaveBaselines(ctx, store.BaselineUpdate{States: changed}); err != nil {
		t.Fatal(err)
	}
}

// prometheusAccept is what Prometheus 2.42 with native histograms enabled
// sends.
const prometheusAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1"

func get(t testing.TB, h http.Handler, accept, encoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec
}

func TestFamiliesInNameOrder(t *testing.T) {
	t.Parallel()
	fs := newFamilies()
	for i := 1; i < len(fs); i++ {
		if fs[i-1].name >= fs[i].name {
			t.Errorf("family %d %q sorts after family %d %q", i-1, fs[i-1].name, i, fs[i].name)
		}
	}
}

// TestTextMatchesExpfmt holds the hand-written text encoder to
// expfmt.MetricFamilyToText: the served text of the golden fleet against
// expfmt's encoding of the same families, and label values and help that
// need escaping.
func TestTextMatchesExpfmt(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	mfs, err := c.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
	}
	if got := get(t, c, "", "").Body.String(); want.String() != got {
		t.Errorf("text exposition differs from expfmt:\n%s", cmp.Diff(want.String(), got))
	}

	f := family{name: "odd", help: "back\\slash and\nnewline \"quoted\"", typ: dto.MetricType_GAUGE, labels: []string{"mount_point"}, order: []int{0}, labelNames: []string{"mount_point"}}
	f.headers()
	for _, v := range []float64{-1.5e-300, 1, 0, -1, math.Inf(+1), math.NaN(), 0.1, 1e21} {
		s := f.encodeSeries(0, []string{"/a \"b\"\\c\nd"}, v)
		odd := &dto.MetricFamily{Name: proto.String(f.name), Help: proto.String(f.help), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{{Name: proto.String("mount_point"), Value: proto.String("/a \"b\"\\c\nd")}},
				Gauge: &dto.Gauge{Value: proto.Float64(v)}}}}
		var want bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&want, odd); err != nil {
			t.Fatal(err)
		}
		if got := string(f.textHeader) + string(s.text); got != want.String() {
			t.Errorf("value %g: got\n%s\nwant\n%s", v, got, want.String())
		}
		pb, err := proto.Marshal(odd.Metric[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.pb, pb) {
			t.Errorf("value %g: Metric message\n%x\nwant\n%x", v, s.pb, pb)
		}
	}
}

// TestProtobufMatchesMarshal: the protobuf exposition is byte for byte
// what protodelim.MarshalTo writes for the same families (the client
// library's encoder), native buckets included.
func TestProtobufMatchesMarshal(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	body := get(t, c, prometheusAccept, "").Body.Bytes()
	mfs, err := c.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, mf := range mfs {
		if _, err := protodelim.MarshalTo(&want, mf); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(want.Bytes(), body) {
		t.Errorf("protobuf exposition (%d bytes) differs from protodelim.MarshalTo (%d bytes)", len(body), want.Len())
	}
}

// TestProtobufNegotiation: Prometheus asking for protobuf gets the
// delimited protobuf exposition with native buckets; gzip is the same body.
func TestProtobufNegotiation(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	text := get(t, c, "", "").Body.String()

	rec := get(t, c, prometheusAccept, "")
	if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, "application/vnd.google.protobuf") || !strings.Contains(ct, "encoding=delimited") {
		t.Fatalf("Content-Type %q, want delimited protobuf", ct)
	}
	dec := expfmt.NewDecoder(bytes.NewReader(rec.Body.Bytes()), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var fromProto bytes.Buffer
	natives := 0
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil && h.GetSchema() == 3 && len(h.GetPositiveSpan()) > 0 {
				natives++
			}
		}
		if _, err := expfmt.MetricFamilyToText(&fromProto, &mf); err != nil {
			t.Fatal(err)
		}
	}
	if natives == 0 {
		t.Error("protobuf exposition: no native histograms")
	}
	if fromProto.String() != text {
		t.Errorf("protobuf and text expositions differ:\nprotobuf:\n%s\ntext:\n%s", fromProto.String(), text)
	}

	for _, accept := range []string{"", prometheusAccept} {
		plain := get(t, c, accept, "").Body.Bytes()
		rec := get(t, c, accept, "gzip")
		if rec.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("Accept-Encoding gzip: Content-Encoding %q", rec.Header().Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(unzipped, plain) {
			t.Errorf("Accept %q: gzip body differs from the plain one", accept)
		}
	}
	if got := get(t, c, "", "gzip;q=0").Header().Get("Content-Encoding"); got != "" {
		t.Errorf("gzip;q=0: Content-Encoding %q", got)
	}
}

// TestCacheInvalidation: between changes a scrape is the cached body; new
// ingest and evaluator passes show at once; a change nothing signals shows
// within MaxAge; agent_up follows the clock.
func TestCacheInvalidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	seed(t, st, goldenFleet())
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := epoch
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c, err := New(st, Options{Now: clock, MaxAge: 30 * time.Second, Evaluator: evaluatorStatus(ev)})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string { return get(t, c, "", "").Body.String() }

	first := scrape()
	if !strings.Contains(first, `plumbline_agent_up{agent_id="db02",host="db02.example.com"} 1`) {
		t.Fatalf("db02 not up:\n%s", first)
	}
	// Nothing changed: the same cached body, not a rebuild.
	c.mu.Lock()
	cached := c.bodies[bodyKey{}]
	c.mu.Unlock()
	if second := scrape(); second != first {
		t.Fatal("second scrape differs with nothing changed")
	}
	c.mu.Lock()
	same := len(c.bodies[bodyKey{}]) > 0 && &c.bodies[bodyKey{}][0] == &cached[0]
	c.mu.Unlock()
	if !same {
		t.Error("second scrape rebuilt the body with nothing changed")
	}

	// New ingest: a geometry snapshot of db01 with a third volume.
	appendRecords(t, st, "db01", snapshotRecord(t, legacyVolume("/data"), nvmeVolume("/log"), nvmeVolume("/new")))
	if got := scrape(); !strings.Contains(got, `mount_point="/new"`) {
		t.Fatalf("after ingest of /new: no /new in\n%s", got)
	}
	if got := scrape(); strings.Contains(got, `plumbline_probe_latency_seconds_count{agent_id="db01",host="db01.example.com",kind="random-read",mount_point="/new"}`) {
		t.Fatal("latency of /new before any probe")
	}

	// An evaluator pass over new probe runs of /new.
	appendRecords(t, st, "db01", newRuns(t)...)
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	const newCount = `plumbline_probe_latency_seconds_count{agent_id="db01",host="db01.example.com",kind="random-read",mount_point="/new"} 300`
	if got := scrape(); !strings.Contains(got, newCount) {
		t.Fatalf("after the evaluator pass: no %q in\n%s", newCount, got)
	}

	// A change that nothing signals (a baseline row written behind the
	// evaluator's back) shows within MaxAge.
	setHistoryRatio(t, st, "db02", "random-write", 7.25)
	const ratio = `plumbline_baseline_ratio{agent_id="db02",host="db02.example.com",kind="random-write",mount_point="/srv/pg",reference="history",signal="median"} 7.25`
	if got := scrape(); strings.Contains(got, ratio) {
		t.Log("unsignalled change already shown (the volumes were re-read)")
	}
	advance(31 * time.Second)
	if got := scrape(); !strings.Contains(got, ratio) {
		t.Fatalf("MaxAge later: no %q in\n%s", ratio, got)
	}

	// The clock alone: db02 (last seen a minute before epoch) goes stale.
	advance(5 * time.Minute)
	if got := scrape(); !strings.Contains(got, `plumbline_agent_up{agent_id="db02",host="db02.example.com"} 0`) {
		t.Fatalf("db02 still up 6 minutes after its last report:\n%s", got)
	}
}

// offsetNotCritical are rules under which a data offset that splits I/Os
// across stripe units is a warning, not critical.
var offsetNotCritical = ingest.Rules{Overrides: align.Overrides{Severity: map[string]string{"partition-offset-stripe-unit": "warning"}}}

// TestRejudgedVolumeShows: a volume judged again under new rules keeps its
// sequence and no agent reports; its new judgement shows on the next
// scrape after MaxAge, and only its series change.
func TestRejudgedVolumeShows(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	seed(t, st, goldenFleet())
	var mu sync.Mutex
	now := epoch
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, err := New(st, Options{Now: clock, MaxAge: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const (
		info    = `plumbline_volume_info{agent_id="db01",cluster="4096",data_offset_bytes="32256",device="/dev/sdb1",fs="ext4",host="db01.example.com",media="hdd-15k",mount_point="/data",`
		finding = `plumbline_volume_finding{agent_id="db01",host="db01.example.com",mount_point="/data",rule="partition-offset-stripe-unit",severity="critical"} 1`
	)
	first := get(t, c, "", "").Body.String()
	if !strings.Contains(first, info+`profile="hdd-15k/raid10/64KiB/legacy-31.5k/4KiB",raid_level="raid10",stripe_unit_bytes="65536",verdict="misaligned"} 1`) ||
		!strings.Contains(first, finding) {
		t.Fatalf("no misaligned /data with its finding in\n%s", first)
	}
	// Under rules where its offset is only a warning, /data is aligned
	// (its profile's offset class follows the verdict).
	judgetest.Rejudge(t, st, "db01", "/data", offsetNotCritical)
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	got := get(t, c, "", "").Body.String()
	if !strings.Contains(got, info+`profile="hdd-15k/raid10/64KiB/misaligned-other/4KiB",raid_level="raid10",stripe_unit_bytes="65536",verdict="aligned"} 1`) ||
		strings.Contains(got, finding) || !strings.Contains(got, strings.Replace(finding, `"critical"`, `"warning"`, 1)) {
		t.Errorf("after MaxAge the rejudged /data is not aligned with its offset finding a warning:\n%s", got)
	}
	// Every other series is as it was.
	others := func(page string) []string {
		var out []string
		for _, l := range strings.Split(page, "\n") {
			if !strings.Contains(l, `agent_id="db01",host="db01.example.com",mount_point="/data"`) && !strings.HasPrefix(l, info) &&
				!strings.HasPrefix(l, "plumbline_volumes{") {
				out = append(out, l)
			}
		}
		return out
	}
	if diff := cmp.Diff(others(first), others(got)); diff != "" {
		t.Errorf("the rejudge changed other volumes' series (-before +after):\n%s", diff)
	}
}

// TestStoreFailureRecovers: a failed read drops the store's families; the
// next good read brings all of them back.
func TestStoreFailureRecovers(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	want := get(t, c, "", "").Body.String()
	st := c.st
	closed := openStore(t)
	closed.Close()
	c.st = closed
	if got := get(t, c, "", "").Body.String(); !strings.Contains(got, "plumbline_exporter_store_success 0") || strings.Contains(got, "plumbline_volume_info") {
		t.Fatalf("closed store:\n%s", got)
	}
	c.st = st
	if got := get(t, c, "", "").Body.String(); got != want {
		t.Errorf("after recovery the exposition differs:\n%s", got)
	}
}

// TestIncrementalMatchesFresh: after ingest that adds and drops volumes
// and evaluator passes that judge some of them, the exposition a collector
// keeps up to date volume by volume is byte for byte that of a new
// collector reading everything, in both formats.
func TestIncrementalMatchesFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	seed(t, st, goldenFleet())
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	status := evaluatorStatus(ev)
	var ticks atomic.Int64 // a clock that moves a little on every read, so the record counts are counted again
	opts := Options{Now: func() time.Time { return epoch.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }, RecordCountsEvery: time.Nanosecond, Evaluator: status}
	c, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		fresh, err := New(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, accept := range []string{"", prometheusAccept} {
			got, want := get(t, c, accept, "").Body.Bytes(), get(t, fresh, accept, "").Body.Bytes()
			if !bytes.Equal(got, want) {
				t.Fatalf("%s (Accept %q): incremental exposition differs from a fresh one:\n%s", step, accept, cmp.Diff(string(want), string(got)))
			}
		}
	}
	check("seeded")

	// db01 drops /log and gains /new; db02 renames its host.
	appendRecords(t, st, "db01", snapshotRecord(t, legacyVolume("/data"), nvmeVolume("/new")))
	if err := st.UpsertAgent(ctx, store.Agent{ID: "db02", Hostname: "db02b.example.com", LastSeen: epoch}); err != nil {
		t.Fatal(err)
	}
	check("after ingest")

	// A pass judging runs of /new and of db02's volume.
	appendRecords(t, st, "db01", newRuns(t)...)
	appendRecords(t, st, "db02",
		store.Record{Kind: store.KindProbe, ProducedAt: epoch, Probe: &store.ProbeResult{MountPoint: "/srv/pg", Device: "md0", Kind: "log-write",
			BlockSizeBytes: 8 * kib, QueueDepth: 1, StartedAt: epoch, Duration: time.Second, Ops: 100, Bytes: 100 * 8 * kib,
			Histogram: runHistogram(t, 5*time.Millisecond, 100)}},
		store.Record{Kind: store.KindProbe, ProducedAt: epoch, Probe: &store.ProbeResult{MountPoint: "/srv/pg", Device: "md0", Kind: "random-read",
			BlockSizeBytes: 8 * kib, QueueDepth: 1, StartedAt: epoch, Skipped: true, StoppedReason: "busy", Histogram: runHistogram(t, 0, 0)}})
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	check("after an evaluator pass")
	got := get(t, c, "", "").Body.String()
	for _, want := range []string{
		`plumbline_probe_latency_seconds_count{agent_id="db01",host="db01.example.com",kind="random-read",mount_point="/new"} 300`,
		`plumbline_probe_latency_seconds_count{agent_id="db02",host="db02b.example.com",kind="log-write",mount_point="/srv/pg"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, `mount_point="/log"`) || strings.Contains(got, `host="db02.example.com"`) {
		t.Errorf("a dropped volume or the old host name is still shown:\n%s", got)
	}
}

// TestClassicCounts: the classic bucket counts taken from the native
// spans and deltas are those of the histogram's buckets, on sparse and
// dense histograms alike.
func TestClassicCounts(t *testing.T) {
	t.Parallel()
	c, err := New(openStore(t), Options{ClassicBuckets: []float64{0x1p-20, 0x1p-10, histogram.UpperBound(-61), 0x1p-6, 0x1p+2}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		var h histogram.Histogram
		for range rng.IntN(50) {
			h.Observe(time.Duration(math.Exp(rng.Float64()*25)) - time.Duration(rng.IntN(2))) // 0 ns to ~70 s, some zero
		}
		raw, err := proto.Marshal(wire.HistogramToProto(&h))
		if err != nil {
			t.Fatal(err)
		}
		f := c.histFactsOf(store.MetricsBaseline{Histogram: raw})
		if !f.ok {
			t.Fatalf("histogram %d did not decode", n)
		}
		for i, bound := range c.opts.ClassicBuckets {
			want := h.ZeroCount()
			for _, b := range h.Buckets() {
				if b.Index <= histogram.Index(bound) {
					want += b.Count
				}
			}
			if f.classic[i] != want {
				t.Errorf("histogram %d, bound %g: classic count %d, want %d", n, bound, f.classic[i], want)
			}
		}
	}
}
