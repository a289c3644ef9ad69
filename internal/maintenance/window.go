// Package maintenance evaluates maintenance windows: recurring periods,
// each a cron schedule of start times in a time zone plus a duration,
// during which no probe starts and a running probe stops (the agent's
// scheduler, stop reason vocab.StopMaintenance).
//
// The schedule expression is parsed by github.com/robfig/cron/v3 (the
// standard five fields, minute hour day-of-month month day-of-week, or a
// descriptor such as @daily); this package adds the time zone, the
// duration and the question the scheduler asks: is t inside a window, and
// when does the next one start.
//
// Time zones and daylight saving time: start times are wall-clock times in
// the window's zone (IANA name, default UTC); the duration is elapsed time.
// The schedule runs on the zone's wall clock, where every time of day
// happens once a day: a start that falls in a skipped hour (spring
// forward, 02:30 on a night that jumps from 02:00 to 03:00) starts at the
// same offset into the jump (03:30), so no window is lost; a start in a
// repeated hour (fall back) happens once, at its first occurrence, so no
// window doubles. (robfig/cron on its own skips the first and fires the
// second twice; window_test.go pins both.)
package maintenance

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zones on hosts without a zone database (Windows)

	"github.com/robfig/cron/v3"
)

// Limits of a window.
const (
	// MaxDuration bounds a window: a longer one is a paused agent, better
	// said by stopping it.
	MaxDuration = 7 * 24 * time.Hour
	// MaxNameBytes bounds a window's name (metric label, logs).
	MaxNameBytes = 64
	maxSpecBytes = 256
)

// Window is one recurring maintenance window (YAML: name, schedule,
// duration, time_zone).
type Window struct {
	// Name identifies the window in logs, metrics and the API.
	Name string `yaml:"name"`
	// Schedule is a cron expression of the window's start times.
	Schedule string `yaml:"schedule"`
	// Duration is how long each window lasts (elapsed time).
	Duration time.Duration `yaml:"duration"`
	// TimeZone is an IANA zone name (Europe/Berlin); empty: UTC.
	TimeZone string `yaml:"time_zone,omitempty"`
}

// ErrInvalid wraps every parse error.
var ErrInvalid = errors.New("invalid maintenance window")

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Compiled is a parsed Window.
type Compiled struct {
	Window
	sched *cron.SpecSchedule // evaluated on wall-clock times (as UTC)
	loc   *time.Location
}

// Compile parses and checks w.
func (w Window) Compile() (Compiled, error) {
	bad := func(format string, args ...any) (Compiled, error) {
		return Compiled{}, fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if w.Name == "" || len(w.Name) > MaxNameBytes || strings.IndexFunc(w.Name, notNameRune) >= 0 {
		return bad("name %q: want 1 to %d letters, digits, '-', '_' or '.'", w.Name, MaxNameBytes)
	}
	if w.Duration < time.Minute || w.Duration > MaxDuration {
		return bad("duration %s: want 1m to %s", w.Duration, MaxDuration)
	}
	spec := strings.TrimSpace(w.Schedule)
	if len(spec) > maxSpecBytes || strings.HasPrefix(spec, "@every") || strings.Contains(spec, "TZ=") {
		return bad("schedule %q: want a cron expression of start times (5 fields or @daily/@weekly/...; the zone goes in time_zone)", w.Schedule)
	}
	loc := time.UTC
	if w.TimeZone != "" {
		l, err := loadZone(w.TimeZone)
		if err != nil {
			return bad("time_zone %q: %v", w.TimeZone, err)
		}
		loc = l
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return bad("schedule %q: %v", w.Schedule, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return bad("schedule %q: want a cron expression of start times", w.Schedule)
	}
	ss.Location = time.UTC // the wall clock of loc, see NextStart
	c := Compiled{Window: w, sched: ss, loc: loc}
	// A schedule that never fires (0 0 30 2 *) is a mistake, not a window.
	if c.NextStart(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return bad("schedule %q: never starts", w.Schedule)
	}
	return c, nil
}

// loadZone loads an IANA zone, refusing the host-dependent "Local".
func loadZone(name string) (*time.Location, error) {
	if name == "Local" || len(name) > 64 {
		return nil, errors.New("want an IANA zone name such as Europe/Berlin or UTC")
	}
	return time.LoadLocation(name)
}

func notNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
}

// Validate checks w.
func (w Window) Validate() error {
	_, err := w.Compile()
	return err
}

// maxStarts bounds the starts Active walks through: one a minute for the
// longest window.
const maxStarts = int(MaxDuration/time.Minute) + 1

// Active reports whether t is inside one of c's windows ([start,
// start+duration)), and when the window that holds t ends (windows of
// the same schedule that overlap or touch count as one).
func (c Compiled) Active(t time.Time) (bool, time.Time) {
	var end time.Time
	n := 0
	for s := c.NextStart(t.Add(-c.Duration)); !s.IsZero() && !s.After(t) && n < maxStarts; s = c.NextStart(s) {
		end = s.Add(c.Duration)
		n++
	}
	if n == 0 || !end.After(t) {
		return false, time.Time{}
	}
	for s := c.NextStart(t); !s.IsZero() && !s.After(end) && n < maxStarts; s = c.NextStart(s) {
		end = s.Add(c.Duration)
		n++
	}
	return true, end
}

// NextStart is the first start of a window after t (zero: none within
// five years). The schedule runs on the zone's wall clock.
func (c Compiled) NextStart(t time.Time) time.Time {
	wall := wallClock(t, c.loc)
	for range 4 { // a wall-clock start in a repeated hour maps before t once
		next := c.sched.Next(wall)
		if next.IsZero() {
			return time.Time{}
		}
		if r := inZone(next, c.loc); r.After(t) {
			return r
		}
		wall = next
	}
	return time.Time{}
}

// wallClock is t's wall clock in loc, written as a UTC time.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// inZone is the instant a wall-clock time (written as UTC) names in loc:
// in a skipped hour, the same offset into the jump (time.Date's
// normalisation); in a repeated hour, the first occurrence (time.Date
// does not promise which; the shifts are those zones use).
func inZone(wall time.Time, loc *time.Location) time.Time {
	r := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	for _, shift := range []time.Duration{2 * time.Hour, time.Hour, 30 * time.Minute} {
		if e := r.Add(-shift); wallClock(e, loc).Equal(wall) {
			return e
		}
	}
	return r
}
