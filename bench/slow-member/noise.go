//go:build linux

package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The noise replay: the healthy intervals of recorded runs (-record: every
// member's diskstats deltas, from control arrays for the whole run and from
// trial arrays until their fault) replayed for -days simulated days per
// array through the server's own sibling judge (members.JudgeGroup and
// members.Observe at members.DefaultConfig), counting the members it
// names. Each simulated array is a moving block bootstrap of one recorded
// array's healthy intervals (blocks of noiseBlock intervals in recorded
// order, so that runs of noisy intervals (longer than the judge's sustain) — what the judge's sustain must
// ride out — stay as they were), each at its own seed.

// noiseBlock is the bootstrap's block length in intervals.
const noiseBlock = 5

// healthySeries reads recordings and returns, per recorded array, its
// healthy intervals in time order, each a member group. An array's
// intervals stop at the first with a fault on any member.
func healthySeries(paths []string) ([][]store.MemberGroup, []time.Duration, error) {
	type key struct {
		file, array int
	}
	type ivl struct {
		at time.Time
		g  store.MemberGroup
		d  time.Duration
	}
	series := map[key][]ivl{}
	faulted := map[key]time.Time{}
	for fi, p := range paths {
		err := readSamples(p, func(s sample) {
			k := key{fi, s.Array}
			if s.Fault != "" {
				if t, ok := faulted[k]; !ok || s.At.Before(t) {
					faulted[k] = s.At
				}
			}
			ss := series[k]
			if n := len(ss); n == 0 || !ss[n-1].at.Equal(s.At) {
				ss = append(ss, ivl{at: s.At, d: s.Interval, g: store.MemberGroup{Device: fmt.Sprintf("rec%d-array%d", fi, s.Array), Kind: string(vocab.MemberGroupMD)}})
			}
			g := &ss[len(ss)-1].g
			g.Members = append(g.Members, store.MemberCounters{Device: s.Device, State: []string{vocab.MDInSync},
				Reads: s.Reads, ReadTimeMS: s.ReadMS, Writes: s.Writes, WriteTimeMS: s.WriteMS,
				ReadSectors: s.ReadSec, WriteSectors: s.WriteSec, IOTimeMS: s.IOMS})
			series[k] = ss
		})
		if err != nil {
			return nil, nil, err
		}
	}
	keys := make([]key, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return (a.file-b.file)*1000 + a.array - b.array })
	var out [][]store.MemberGroup
	var every []time.Duration
	for _, k := range keys {
		var gs []store.MemberGroup
		var d time.Duration
		for _, iv := range series[k] {
			if t, ok := faulted[k]; ok && !iv.at.Before(t) {
				break
			}
			gs, d = append(gs, iv.g), iv.d
		}
		if len(gs) >= noiseBlock {
			out, every = append(out, gs), append(every, d)
		}
	}
	return out, every, nil
}

// readSamples calls f for every sample in a JSON-lines file (gzipped if
// its name ends in .gz).
func readSamples(path string, f func(sample)) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	var r io.Reader = fh
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(fh)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		var s sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		f(s)
	}
	return sc.Err()
}

// replayResult is what a noise replay found.
type replayResult struct {
	Arrays    int     // recorded arrays replayed
	Intervals int     // recorded healthy intervals they had
	Days      float64 // simulated days per array and walk
	Walks     int     // bootstrap walks per array
	Named     int     // members named (episodes)
	Beyond    int     // member-intervals judged beyond their siblings
	Judged    int     // member-intervals judged
}

// replayNoise replays each recorded array's healthy series for days
// simulated days through the judge, seeds times with different bootstraps.
func replayNoise(series [][]store.MemberGroup, every []time.Duration, days float64, seeds int, log io.Writer) replayResult {
	res := replayResult{Arrays: len(series), Days: days, Walks: seeds}
	cfg := members.DefaultConfig()
	for i, gs := range series {
		res.Intervals += len(gs)
		n := int(days * 24 * float64(time.Hour) / float64(every[i]))
		for seed := range seeds {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(seed)))
			states := make([]store.MemberState, len(gs[0].Members))
			t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for done := 0; done < n; {
				start := rng.IntN(len(gs) - noiseBlock + 1)
				for _, g := range gs[start : start+noiseBlock] {
					if len(g.Members) != len(states) {
						continue
					}
					for m, v := range members.JudgeGroup(cfg, every[i], g) {
						if v.Judged {
							res.Judged++
						}
						if v.Beyond {
							res.Beyond++
						}
						if members.Observe(cfg, &states[m], v, t, t.Add(every[i])) && states[m].Slow {
							res.Named++
							fmt.Fprintf(log, "slow-member: noise: array %s member %s named (x%.2f %s) on simulated day %.1f\n",
								g.Device, v.Device, v.Ratio, v.Direction, float64(done)*every[i].Hours()/24)
						}
					}
					t = t.Add(every[i])
					done++
				}
			}
		}
	}
	return res
}

// String is the replay's result line.
func (r replayResult) String() string {
	return fmt.Sprintf("noise_days=%g noise_named=%d noise_arrays=%d noise_walks=%d noise_array_days=%g recorded_intervals=%d judged=%d beyond=%d",
		r.Days, r.Named, r.Arrays, r.Walks, r.Days*float64(r.Walks*r.Arrays), r.Intervals, r.Judged, r.Beyond)
}
