//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/procfs/blockdevice"
)

// sample is one member's /proc/diskstats counters over one interval: the
// kernel's own accounting, the evidence the agent sends and the judge
// reads. The recorder writes them as JSON lines (-record), so that a run's
// member noise and faults can be replayed and inspected.
type sample struct {
	At       time.Time     `json:"at"` // end of the interval
	Interval time.Duration `json:"interval_ns"`
	Array    int           `json:"array"`
	Level    string        `json:"level"`
	Member   int           `json:"member"`
	Device   string        `json:"device"`
	Fault    string        `json:"fault,omitempty"` // the fault on this member during the interval
	Reads    uint64        `json:"reads"`
	ReadMS   uint64        `json:"read_time_ms"`
	Writes   uint64        `json:"writes"`
	WriteMS  uint64        `json:"write_time_ms"`
	ReadSec  uint64        `json:"read_sectors"`
	WriteSec uint64        `json:"write_sectors"`
	IOMS     uint64        `json:"io_time_ms"`
}

// recorder samples every member of every array each interval.
type recorder struct {
	arrays []*array
	every  time.Duration
	out    io.Writer // JSON lines; nil: none
	log    io.Writer
	last   map[string]blockdevice.Diskstats
	lastAt time.Time
}

func readDiskstats() (map[string]blockdevice.Diskstats, error) {
	fs, err := blockdevice.NewFS("/proc", "/sys")
	if err != nil {
		return nil, err
	}
	all, err := fs.ProcDiskstats()
	if err != nil {
		return nil, err
	}
	out := make(map[string]blockdevice.Diskstats, len(all))
	for _, d := range all {
		out[d.DeviceName] = d
	}
	return out, nil
}

// run samples until ctx ends.
func (r *recorder) run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		if err := r.tick(); err != nil {
			fmt.Fprintln(r.log, "slow-member: diskstats:", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick takes one sample and, after the first, writes every member's deltas
// and a line per trial array with its faulted member's await against its
// siblings'.
func (r *recorder) tick() error {
	now := time.Now()
	cur, err := readDiskstats()
	if err != nil {
		return err
	}
	prev, prevAt := r.last, r.lastAt
	r.last, r.lastAt = cur, now
	if prev == nil {
		return nil
	}
	enc := json.NewEncoder(r.out)
	for _, a := range r.arrays {
		var ss []sample
		for m, dev := range a.lab.Members {
			name := filepath.Base(dev)
			c, p := cur[name], prev[name]
			s := sample{At: now, Interval: now.Sub(prevAt), Array: a.idx, Level: string(a.geo.Level), Member: m, Device: name,
				Reads: c.ReadIOs - p.ReadIOs, ReadMS: c.ReadTicks - p.ReadTicks, Writes: c.WriteIOs - p.WriteIOs,
				WriteMS: c.WriteTicks - p.WriteTicks, ReadSec: c.ReadSectors - p.ReadSectors,
				WriteSec: c.WriteSectors - p.WriteSectors, IOMS: c.IOsTotalTicks - p.IOsTotalTicks}
			if a.trial != nil && a.trial.member == m && a.trial.faultedAt(prevAt) {
				s.Fault = a.trial.kind.name
			}
			ss = append(ss, s)
			if r.out != nil {
				enc.Encode(s)
			}
		}
		if a.trial != nil {
			fmt.Fprintf(r.log, "slow-member: %s array %d (%s) member %d %s: await %s\n",
				now.UTC().Format("15:04:05"), a.idx, a.shapes, a.trial.member, a.trial.state(now), evidence(ss, a.trial.member))
		}
	}
	return nil
}

// evidence is the member's read and write await (ms) against its
// siblings' median, as the kernel counted them.
func evidence(ss []sample, m int) string {
	dir := func(ops, ms func(sample) uint64) string {
		var sib []float64
		for _, s := range ss {
			if s.Member != m && ops(s) > 0 {
				sib = append(sib, float64(ms(s))/float64(ops(s)))
			}
		}
		me := ss[m]
		if ops(me) == 0 || len(sib) == 0 {
			return "-"
		}
		slices.Sort(sib)
		med := sib[len(sib)/2]
		if len(sib)%2 == 0 {
			med = (sib[len(sib)/2-1] + sib[len(sib)/2]) / 2
		}
		v := float64(ms(me)) / float64(ops(me))
		ratio := "inf"
		if med > 0 {
			ratio = fmt.Sprintf("%.2f", v/med)
		}
		return fmt.Sprintf("%.1f vs %.1f ms (x%s, %d ops)", v, med, ratio, ops(me))
	}
	return "read " + dir(func(s sample) uint64 { return s.Reads }, func(s sample) uint64 { return s.ReadMS }) +
		", write " + dir(func(s sample) uint64 { return s.Writes }, func(s sample) uint64 { return s.WriteMS })
}
