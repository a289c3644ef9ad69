//go:build linux

package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeRecording writes a recording of one RAID 5 × 4 array: intervals
// minutes of 60-second samples with await around 8 ms on every member,
// member 2 at slow times that from faultAt on (a fault marked as the
// recorder marks it; faultAt < 0: never).
func writeRecording(t *testing.T, intervals, faultAt int, slow float64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rec.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	for i := range intervals {
		for m := range 4 {
			s := sample{At: t0.Add(time.Duration(i) * time.Minute), Interval: time.Minute, Array: 0, Level: "raid5", Member: m,
				Device: "loop" + string(rune('0'+m)), Reads: 600, Writes: 300, ReadSec: 600 * 16, WriteSec: 300 * 16, IOMS: 9000}
			await := 8 + rng.Float64()
			if m == 2 && faultAt >= 0 && i >= faultAt {
				await *= slow
				s.Fault = "slow"
			}
			s.ReadMS, s.WriteMS = uint64(600*await), uint64(300*await)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// TestNoiseReplay: healthy intervals replayed for a day name no member;
// a recording whose member stays 3× slower throughout (no fault marked,
// so the replay takes it for noise) has that member named — the replay
// can name, so its 0 means something. The faulted part of a recording is
// left out of the noise.
func TestNoiseReplay(t *testing.T) {
	t.Parallel()
	series, every, err := healthySeries([]string{writeRecording(t, 40, 30, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || len(series[0]) != 30 || every[0] != time.Minute {
		t.Fatalf("healthy series: %d arrays, %v intervals, every %v; want 1 array of the 30 intervals before the fault, every 1m", len(series), len(series), every)
	}
	if r := replayNoise(series, every, 1, 2, io.Discard); r.Named != 0 || r.Judged == 0 {
		t.Errorf("healthy replay: %v; want members judged and none named", r)
	}
	series, every, err = healthySeries([]string{writeRecording(t, 40, -1, 3)})
	if err != nil {
		t.Fatal(err)
	}
	slow := series[0]
	for i := range slow {
		slow[i].Members[2].ReadTimeMS *= 3
		slow[i].Members[2].WriteTimeMS *= 3
	}
	if r := replayNoise(series, every, 1, 1, io.Discard); r.Named == 0 {
		t.Errorf("a member 3x slower throughout: %v; want it named", r)
	}
}
