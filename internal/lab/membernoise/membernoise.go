// Package membernoise replays recorded member noise through the server's
// sibling judge (internal/server/members): real /proc/diskstats samples of
// sibling devices doing the same work on this machine (testdata/record.sh:
// loop devices with direct I/O over files on its disk, one fio load on
// each, among the other work the machine does), cut into the agent's
// intervals and drawn in blocks at random offsets until they cover as many
// days as asked. A healthy group must never have a member named; the same
// recording with one member's time scaled must.
package membernoise

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// counters are one device's cumulative /proc/diskstats fields.
type counters struct {
	reads, readSectors, readMS, writes, writeSectors, writeMS, ioMS uint64
}

// Recording is a group's samples: Devices' counters at each time.
type Recording struct {
	Devices []string
	At      []time.Time
	c       [][]counters // c[sample][device]
}

// Parse reads record.sh's output: "unix_ns name" and the first 11
// /proc/diskstats fields after the name, one line a device and sample.
// A sample missing a device is dropped.
func Parse(r io.Reader) (*Recording, error) {
	type row struct {
		at  int64
		dev string
		c   counters
	}
	var rows []row
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 13 {
			return nil, fmt.Errorf("line %d: %d fields, want 13", n, len(f))
		}
		var v [12]uint64
		for i, s := range append([]string{f[0]}, f[2:]...) {
			x, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			v[i] = x
		}
		// reads, merged, sectors, ms, writes, merged, sectors, ms, in flight, io ms, weighted.
		rows = append(rows, row{int64(v[0]), f[1], counters{reads: v[1], readSectors: v[3], readMS: v[4],
			writes: v[5], writeSectors: v[7], writeMS: v[8], ioMS: v[10]}})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rec := &Recording{}
	for _, r := range rows {
		if !slices.Contains(rec.Devices, r.dev) {
			rec.Devices = append(rec.Devices, r.dev)
		}
	}
	idx := map[int64]int{}
	var byAt [][]*counters
	for _, r := range rows {
		i, ok := idx[r.at]
		if !ok {
			i = len(byAt)
			idx[r.at] = i
			byAt = append(byAt, make([]*counters, len(rec.Devices)))
			rec.At = append(rec.At, time.Unix(0, r.at))
		}
		c := r.c
		byAt[i][slices.Index(rec.Devices, r.dev)] = &c
	}
	keep := rec.At[:0]
	for i, cs := range byAt {
		if slices.Contains(cs, nil) {
			continue
		}
		row := make([]counters, len(cs))
		for j, c := range cs {
			row[j] = *c
		}
		rec.c = append(rec.c, row)
		keep = append(keep, rec.At[i])
	}
	rec.At = keep
	if len(rec.Devices) < 2 || len(rec.At) < 2 {
		return nil, fmt.Errorf("%d devices over %d samples: want 2 or more of each", len(rec.Devices), len(rec.At))
	}
	return rec, nil
}

// Duration is the time the recording covers.
func (r *Recording) Duration() time.Duration { return r.At[len(r.At)-1].Sub(r.At[0]) }

// interval is the group's deltas from sample i to the first sample j at
// least every later, with the slowdown applied (each device's request
// time multiplied), and j; false past the end or where a counter went
// backwards.
func (r *Recording) interval(i int, every time.Duration, slow map[string]float64) (store.MemberGroup, int, bool) {
	j := i + 1
	for j < len(r.At) && r.At[j].Sub(r.At[i]) < every {
		j++
	}
	if j >= len(r.At) {
		return store.MemberGroup{}, 0, false
	}
	g := store.MemberGroup{Device: "md-noise", Kind: string(vocab.MemberGroupMD)}
	for d, dev := range r.Devices {
		a, b := r.c[i][d], r.c[j][d]
		if b.reads < a.reads || b.writes < a.writes || b.readMS < a.readMS || b.writeMS < a.writeMS || b.ioMS < a.ioMS {
			return store.MemberGroup{}, 0, false
		}
		m := store.MemberCounters{Device: dev, State: []string{vocab.MDInSync},
			Reads: b.reads - a.reads, ReadTimeMS: b.readMS - a.readMS, ReadSectors: b.readSectors - a.readSectors,
			Writes: b.writes - a.writes, WriteTimeMS: b.writeMS - a.writeMS, WriteSectors: b.writeSectors - a.writeSectors,
			IOTimeMS: b.ioMS - a.ioMS}
		if f, ok := slow[dev]; ok {
			m.ReadTimeMS, m.WriteTimeMS = uint64(float64(m.ReadTimeMS)*f), uint64(float64(m.WriteTimeMS)*f)
		}
		g.Members = append(g.Members, m)
	}
	return g, j, true
}

// Options shape a replay. Zero fields take their defaults.
type Options struct {
	// Days of intervals to replay (default 7).
	Days int
	// Every is the agent's interval (default 60s, its default).
	Every time.Duration
	// Block is how many consecutive intervals of the recording one draw
	// takes (default 10): noise keeps its runs within a block.
	Block int
	// Seed of the draws (default 1).
	Seed uint64
	// Slow multiplies the request time of the named devices (a fault
	// injected into the recording).
	Slow map[string]float64
	// Config is the judge's (members.DefaultConfig).
	Config members.Config
}

// Result is what the judge made of a replay.
type Result struct {
	Intervals int // intervals replayed
	Judged    int // member-intervals compared in some direction
	// Named are the devices named slow at least once, each with when it
	// was first named (since the replay's start).
	Named map[string]time.Duration
}

// Replay judges opts.Days of intervals drawn from rec with the sibling
// judge's own comparison and state machine (members.JudgeGroup,
// members.Observe), as the server's loop runs them. A recording shorter
// than one interval is an error.
func Replay(rec *Recording, opts Options) (Result, error) {
	opts.Days = max(opts.Days, 0)
	if opts.Days == 0 {
		opts.Days = 7
	}
	if opts.Every <= 0 {
		opts.Every = time.Minute
	}
	if opts.Block <= 0 {
		opts.Block = 10
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	// The samples an interval can start at: a whole interval after them.
	starts := 0
	for starts < len(rec.At) && rec.At[len(rec.At)-1].Sub(rec.At[starts]) >= opts.Every {
		starts++
	}
	if starts == 0 {
		return Result{}, fmt.Errorf("a recording of %s: want at least one interval of %s", rec.Duration(), opts.Every)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	states := map[string]*store.MemberState{}
	res := Result{Named: map[string]time.Duration{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := t0
	want := int(time.Duration(opts.Days) * 24 * time.Hour / opts.Every)
	for res.Intervals < want {
		i := rng.IntN(starts)
		for b := range opts.Block {
			g, next, ok := rec.interval(i, opts.Every, opts.Slow)
			if !ok && b == 0 {
				return res, fmt.Errorf("sample %d: a counter went backwards", i)
			}
			if !ok || res.Intervals >= want {
				break
			}
			d := rec.At[next].Sub(rec.At[i])
			for k, v := range members.JudgeGroup(opts.Config, d, g) {
				st := states[v.Device]
				if st == nil {
					st = &store.MemberState{Device: v.Device}
					states[v.Device] = st
				}
				if v.Judged {
					res.Judged++
				}
				if members.Observe(opts.Config, st, v, at, at.Add(d)) && st.Slow {
					if _, seen := res.Named[g.Members[k].Device]; !seen {
						res.Named[g.Members[k].Device] = at.Add(d).Sub(t0)
					}
				}
			}
			at = at.Add(d)
			res.Intervals++
			i = next // the next interval starts where this one ended
		}
	}
	return res, nil
}
