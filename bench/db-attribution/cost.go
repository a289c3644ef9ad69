//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100
// on every Linux architecture Go supports).
const clockTicks = 100

// cpuSeconds is the user + system CPU time of a process so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields after its ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// costRound is one window of the cost measurement.
type costRound struct {
	collect bool
	cpu     float64 // the agent's CPU, share of one core
	tps     float64 // the workload's transactions a second
}

// measureCost restarts the agent without probes, alternately with the
// database sources (every dbEvery) and without, rounds times each; in
// each window the workload runs unthrottled on d and the agent's CPU time
// is read from /proc/<pid>/stat.
func (b *bench) measureCost(ctx context.Context, d *database, dbYAML string, rounds int, window time.Duration) ([]costRound, error) {
	var out []costRound
	for r := range rounds * 2 {
		collect := r%2 == 0
		extra := ""
		if collect {
			extra = dbYAML
		}
		if err := b.stack.RestartAgent(ctx, extra, false); err != nil {
			return out, err
		}
		if err := ctxtime.Sleep(ctx, 10*time.Second); err != nil { // start-up (TLS, geometry) is not the collector's cost
			return out, err
		}
		pid := b.stack.Pid("agent")
		before, err := cpuSeconds(pid)
		if err != nil {
			return out, err
		}
		l, err := d.load(2, 0, window)
		if err != nil {
			return out, err
		}
		start := time.Now()
		outText, err := l.Wait(ctx)
		elapsed := time.Since(start).Seconds()
		after, cerr := cpuSeconds(pid)
		if err != nil || cerr != nil {
			return out, fmt.Errorf("cost window: %v %v\n%s", err, cerr, outText)
		}
		c := costRound{collect: collect, cpu: (after - before) / elapsed, tps: d.tps(outText)}
		b.logf("cost: collect=%v agent CPU %.3f%% of a core, %s %.1f tps", c.collect, c.cpu*100, d.name, c.tps)
		out = append(out, c)
	}
	return out, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// costLine sums the rounds up: the agent's CPU and the workload's TPS
// with and without collection (medians).
func costLine(rs []costRound, every time.Duration) string {
	var cpuOn, cpuOff, tpsOn, tpsOff []float64
	for _, r := range rs {
		if r.collect {
			cpuOn, tpsOn = append(cpuOn, r.cpu), append(tpsOn, r.tps)
		} else {
			cpuOff, tpsOff = append(cpuOff, r.cpu), append(tpsOff, r.tps)
		}
	}
	return fmt.Sprintf("cost db_every=%s agent_cpu_on=%.4f%% agent_cpu_off=%.4f%% collect_cpu=%.4f%% tps_on=%.1f tps_off=%.1f rounds=%d",
		every, median(cpuOn)*100, median(cpuOff)*100, (median(cpuOn)-median(cpuOff))*100, median(tpsOn), median(tpsOff), len(cpuOn))
}
