package attribution

import (
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/vocab"
)

func TestAttribute(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	walSlow := Op{Source: "main", Op: "wal-sync", Status: baseline.Degraded, Latency: 0.0041, HistoryMedian: 0.0013, Ratio: 3.2, Since: at.Add(-5 * time.Minute)}
	readOK := Op{Source: "main", Op: "read", Status: baseline.OK, Latency: 0.0002, HistoryMedian: 0.0002, Ratio: 1}
	steady := Probe{Kind: "log-write", LastRun: at.Add(-time.Minute), Trusted: true, HistoryRatio: 1.05, State: baseline.State{Status: baseline.OK}}
	degraded := steady
	degraded.State = baseline.State{Status: baseline.Degraded, Signal: baseline.SignalMedian, Ratio: 2.9, Reference: baseline.History}
	pending := steady
	pending.HistoryRatio = 2.8
	throttled := steady
	throttled.State = baseline.State{Status: baseline.Degraded, Signal: baseline.SignalRate, Ratio: 2.5, IOPS: 20, Cap: 50}
	meanUp := steady
	meanUp.MeanRatio = 1.8
	rateShort := steady
	rateShort.RateRatio = 2.5
	stale := steady
	stale.LastRun = at.Add(-2 * time.Hour)
	beforeIt := steady
	beforeIt.LastRun = walSlow.Since.Add(-3 * time.Minute)
	untrusted := steady
	untrusted.Trusted = false
	for _, c := range []struct {
		name   string
		ops    []Op
		probes []Probe
		want   vocab.Attribution
		says   []string
	}{
		{"nothing degraded", []Op{readOK}, []Probe{degraded}, "", nil},
		{"probe degraded too", []Op{walSlow, readOK}, []Probe{degraded}, vocab.AttributionDevice,
			[]string{"device: database main wal-sync 4.1 ms vs 1.3 ms (×3.2)", "log-write degraded, median ×2.9 vs history"}},
		{"probe slower, not yet sustained", []Op{walSlow}, []Probe{pending}, vocab.AttributionDevice, []string{"last run median ×2.8"}},
		{"probe's mean slower (a slow member), median steady", []Op{walSlow}, []Probe{meanUp}, vocab.AttributionDevice, []string{"mean ×1.8"}},
		{"probe on its baseline", []Op{walSlow}, []Probe{steady}, vocab.AttributionLoad, []string{"on its baseline: log-write median ×1.1 vs history"}},
		{"probe throttled", []Op{walSlow}, []Probe{throttled}, vocab.AttributionThrottle, []string{"rate 20/50 IOPS"}},
		{"one kind slowed outranks another's rate shortfall", []Op{walSlow}, []Probe{throttled, degraded}, vocab.AttributionDevice,
			[]string{"log-write degraded, median ×2.9"}},
		{"rate short, not yet sustained", []Op{walSlow}, []Probe{rateShort}, vocab.AttributionThrottle, []string{"rate short of its cap ×2.5"}},
		{"probe too old", []Op{walSlow}, []Probe{stale}, vocab.AttributionUndetermined, []string{"no trusted run within 30m0s"}},
		{"probe's last run before the regression", []Op{walSlow}, []Probe{beforeIt}, vocab.AttributionUndetermined,
			[]string{"has not run since the regression began (2026-11-28T04:55:00Z): waiting for its next run"}},
		{"probe still learning", []Op{walSlow}, []Probe{untrusted}, vocab.AttributionUndetermined, nil},
		{"no probe", []Op{walSlow}, nil, vocab.AttributionUndetermined, nil},
	} {
		got := Attribute(at, c.ops, c.probes, Device{}, Config{})
		if got.Attribution != c.want {
			t.Errorf("%s: Attribute = %q (%s), want %q", c.name, got.Attribution, got.Reason, c.want)
		}
		for _, s := range c.says {
			if !strings.Contains(got.Reason, s) {
				t.Errorf("%s: reason %q does not say %q", c.name, got.Reason, s)
			}
		}
	}
}
