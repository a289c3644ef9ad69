package inventory

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

// quantileFixtures are the histograms TestOneHistogramOneQuantile feeds
// to every path.
func quantileFixtures() map[string]*histogram.Histogram {
	observe := func(ds ...time.Duration) *histogram.Histogram {
		h := &histogram.Histogram{}
		for _, d := range ds {
			h.Observe(d)
		}
		return h
	}
	r := rand.New(rand.NewPCG(23, 23))
	// Log-normal around 124 µs: the median sits in the bucket
	// (122.1 µs, 133.2 µs], whose upper bound the API once showed.
	var ln []time.Duration
	for range 2000 {
		ln = append(ln, time.Duration(124e3*math.Exp(0.3*r.NormFloat64())))
	}
	var spread, oneBucket []time.Duration
	for i := range 100 {
		spread = append(spread, time.Duration(100+i)*time.Microsecond)
		oneBucket = append(oneBucket, 900*time.Microsecond+time.Duration(i)*500*time.Nanosecond)
	}
	return map[string]*histogram.Histogram{
		"log-normal around 124 µs": observe(ln...),
		"100 to 199 µs":            observe(spread...),
		"one bucket":               observe(oneBucket...),
		"one op":                   observe(123456 * time.Nanosecond),
		"half zeros":               observe(0, 0, 0, time.Millisecond, 2*time.Millisecond, 3*time.Millisecond),
		"a 2 s stall":              observe(append(spread, 2*time.Second)...),
	}
}

// TestOneHistogramOneQuantile feeds the same histogram to the inventory
// API (stored as a probe result, read back from the volume's JSON), the
// baseline (what the evaluator judges of the stored run) and the agent's
// probe command (the run's latency summary): each shows the same median
// and p99, and they are the histogram's own quantiles.
func TestOneHistogramOneQuantile(t *testing.T) {
	t.Parallel()
	st := openStore(t, engines[0].DSN(t))
	seedFleet(t, st, 1, 1)
	srv := serveSyncing(t, st, Options{Tokens: []Token{{Name: "test", Secret: "tok"}}, SyncPeriod: 0})
	defer srv.Close()
	_, body := get(t, srv.URL+"/api/v1/volumes?mount_point=/data0", "Authorization", "Bearer tok")
	id := body["volumes"].([]any)[0].(map[string]any)["id"].(string)

	start := time.Now().Add(-time.Hour)
	seq := uint64(10)
	for name, h := range quantileFixtures() {
		seq++
		start = start.Add(time.Minute)
		hb, err := wire.EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		pr := store.ProbeResult{MountPoint: "/data0", Device: "/dev/sdb1", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1,
			StartedAt: start, Duration: 10 * time.Second, Ops: h.Count(), Bytes: 8192 * h.Count(), Histogram: hb}
		if _, err := st.AppendBatch(context.Background(), "agent00", []store.Record{{
			Sequence: seq, Kind: store.KindProbe, ProducedAt: start, Payload: []byte{}, Probe: &pr}}); err != nil {
			t.Fatal(err)
		}

		api := apiLatency(t, srv.URL+"/api/v1/volumes/"+id)
		stored, err := wire.DecodeHistogram(hb) // what the evaluator reads of the run
		if err != nil {
			t.Fatal(err)
		}
		run := evaluator.RunOf(&store.ProbeRun{ProbeResult: pr}, stored)
		cli := probe.LatencyOf(h)

		for _, c := range []struct {
			what                 string
			want, api, base, cli float64
		}{
			{"median", h.Median(), api["p50"], run.Median, cli.P50},
			{"p99", h.Quantile(0.99), api["p99"], run.P99, cli.P99},
		} {
			if c.api != c.want || c.base != c.want || c.cli != c.want {
				t.Errorf("%s: %s: API %v, baseline %v, probe command %v; want all %v", name, c.what, c.api, c.base, c.cli, c.want)
			}
		}
		if api["p95"] != h.Quantile(0.95) {
			t.Errorf("%s: API p95 %v, want %v", name, api["p95"], h.Quantile(0.95))
		}
		t.Logf("%s: median %.6g s, p99 %.6g s", name, h.Median(), h.Quantile(0.99))
	}
}

// apiLatency reads the random-read probe's latency_seconds from the
// volume's detail.
func apiLatency(t *testing.T, url string) map[string]float64 {
	t.Helper()
	_, detail := get(t, url, "Authorization", "Bearer tok")
	probes, _ := detail["probes"].([]any)
	for _, p := range probes {
		m := p.(map[string]any)
		if m["kind"] != "random-read" {
			continue
		}
		lat, _ := m["latency_seconds"].(map[string]any)
		out := map[string]float64{}
		for k, v := range lat {
			n, _ := v.(json.Number)
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				t.Fatalf("latency_seconds.%s = %v: %v", k, v, err)
			}
			out[k] = f
		}
		return out
	}
	t.Fatalf("volume detail has no random-read probe: %v", detail)
	return nil
}
