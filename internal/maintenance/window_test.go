package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustCompile(t *testing.T, w Window) Compiled {
	t.Helper()
	c, err := w.Compile()
	if err != nil {
		t.Fatalf("Compile(%+v) = %v", w, err)
	}
	return c
}

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestActive(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	ny := zone(t, "America/New_York")
	nightly := Window{Name: "backup", Schedule: "0 2 * * *", Duration: 2 * time.Hour, TimeZone: "Europe/Berlin"}
	for _, tc := range []struct {
		name    string
		w       Window
		at      time.Time
		active  bool
		wantEnd time.Time
	}{
		{"before the start", nightly, time.Date(2026, 6, 10, 1, 59, 59, 0, berlin), false, time.Time{}},
		{"at the start", nightly, time.Date(2026, 6, 10, 2, 0, 0, 0, berlin), true, time.Date(2026, 6, 10, 4, 0, 0, 0, berlin)},
		{"inside", nightly, time.Date(2026, 6, 10, 3, 59, 0, 0, berlin), true, time.Date(2026, 6, 10, 4, 0, 0, 0, berlin)},
		{"at the end (half-open)", nightly, time.Date(2026, 6, 10, 4, 0, 0, 0, berlin), false, time.Time{}},
		{"same instant seen from UTC", nightly, time.Date(2026, 6, 10, 0, 30, 0, 0, time.UTC), true, time.Date(2026, 6, 10, 2, 0, 0, 0, time.UTC)},
		{"zone matters: 02:30 UTC is 04:30 in Berlin", nightly, time.Date(2026, 6, 10, 2, 30, 0, 0, time.UTC), false, time.Time{}},
		{"default zone is UTC", Window{Name: "u", Schedule: "0 2 * * *", Duration: time.Hour}, time.Date(2026, 6, 10, 2, 30, 0, 0, time.UTC), true, time.Date(2026, 6, 10, 3, 0, 0, 0, time.UTC)},
		{"weekly on Sunday, a Monday", Window{Name: "w", Schedule: "0 22 * * 0", Duration: 6 * time.Hour, TimeZone: "America/New_York"}, time.Date(2026, 6, 15, 3, 0, 0, 0, ny), true, time.Date(2026, 6, 15, 4, 0, 0, 0, ny)},
		{"weekly on Sunday, a Tuesday", Window{Name: "w", Schedule: "0 22 * * 0", Duration: 6 * time.Hour, TimeZone: "America/New_York"}, time.Date(2026, 6, 16, 3, 0, 0, 0, ny), false, time.Time{}},
		{"overlapping starts are one window", Window{Name: "o", Schedule: "0 * * * *", Duration: 90 * time.Minute}, time.Date(2026, 6, 10, 5, 10, 0, 0, time.UTC), true, time.Time{}},
		// DST: Berlin springs from 02:00 to 03:00 on 29 March 2026. A
		// 02:30 start does not exist that night: the window starts 03:30
		// and still lasts its hour (no window is lost).
		{"spring forward: skipped start moves into the jump", Window{Name: "s", Schedule: "30 2 * * *", Duration: time.Hour, TimeZone: "Europe/Berlin"}, time.Date(2026, 3, 29, 3, 45, 0, 0, berlin), true, time.Date(2026, 3, 29, 4, 30, 0, 0, berlin)},
		{"spring forward: before the moved start", Window{Name: "s", Schedule: "30 2 * * *", Duration: time.Hour, TimeZone: "Europe/Berlin"}, time.Date(2026, 3, 29, 3, 15, 0, 0, berlin), false, time.Time{}},
		// The duration is elapsed time: 01:00 + 2h on the spring night
		// ends at 04:00 wall clock.
		{"spring forward: duration is elapsed time", Window{Name: "e", Schedule: "0 1 * * *", Duration: 2 * time.Hour, TimeZone: "Europe/Berlin"}, time.Date(2026, 3, 29, 3, 59, 0, 0, berlin), true, time.Date(2026, 3, 29, 4, 0, 0, 0, berlin)},
		// Berlin falls back from 03:00 CEST to 02:00 CET on 25 October
		// 2026: 02:30 happens twice; the window starts once, at the
		// first, and is over by the second.
		{"fall back: first 02:30 starts it", Window{Name: "f", Schedule: "30 2 * * *", Duration: 20 * time.Minute, TimeZone: "Europe/Berlin"}, time.Date(2026, 10, 25, 0, 40, 0, 0, time.UTC), true, time.Date(2026, 10, 25, 0, 50, 0, 0, time.UTC)},
		{"fall back: second 02:30 does not", Window{Name: "f", Schedule: "30 2 * * *", Duration: 20 * time.Minute, TimeZone: "Europe/Berlin"}, time.Date(2026, 10, 25, 1, 40, 0, 0, time.UTC), false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, tc.w)
			active, end := c.Active(tc.at)
			if active != tc.active {
				t.Fatalf("Active(%s) = %v, want %v", tc.at, active, tc.active)
			}
			if !tc.wantEnd.IsZero() && !end.Equal(tc.wantEnd) {
				t.Errorf("Active(%s) ends %s, want %s", tc.at, end, tc.wantEnd)
			}
			if tc.name == "overlapping starts are one window" && !end.After(tc.at.Add(time.Hour)) {
				t.Errorf("overlapping: end %s, want later starts to extend it", end)
			}
		})
	}
}

// Over a whole year in a DST zone, a daily window starts once a day: none
// lost in spring, none doubled in autumn.
func TestNextStartOncePerDay(t *testing.T) {
	for _, tz := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"} {
		for _, spec := range []string{"30 2 * * *", "0 2 * * *", "59 1 * * *"} {
			c := mustCompile(t, Window{Name: "d", Schedule: spec, Duration: time.Hour, TimeZone: tz})
			loc := zone(t, tz)
			at := time.Date(2026, 1, 1, 12, 0, 0, 0, loc)
			days := map[string]int{}
			for range 365 {
				at = c.NextStart(at)
				if at.IsZero() {
					t.Fatalf("%s %q: NextStart ran out", tz, spec)
				}
				days[at.In(loc).Format("2006-01-02")]++
			}
			if len(days) != 365 {
				t.Errorf("%s %q: 365 starts fell on %d days, want one a day", tz, spec, len(days))
			}
		}
	}
}

func TestSet(t *testing.T) {
	s, err := Compile([]Window{
		{Name: "backup", Schedule: "0 2 * * *", Duration: 2 * time.Hour},
		{Name: "patch", Schedule: "0 3 * * 6", Duration: 3 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	sat := time.Date(2026, 6, 13, 3, 30, 0, 0, time.UTC) // a Saturday
	if name, end := s.Active(sat); name != "backup" || !end.Equal(time.Date(2026, 6, 13, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("Active(Saturday 03:30) = %q until %s, want backup until 06:00 (the later end)", name, end)
	}
	if name, _ := s.Active(time.Date(2026, 6, 13, 12, 0, 0, 0, time.UTC)); name != "" {
		t.Errorf("Active(noon) = %q, want none", name)
	}
	if next, name := s.NextStart(time.Date(2026, 6, 12, 12, 0, 0, 0, time.UTC)); name != "backup" || !next.Equal(time.Date(2026, 6, 13, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("NextStart = %s %q", next, name)
	}
	var none Set
	if name, _ := none.Active(sat); name != "" {
		t.Errorf("zero Set active: %q", name)
	}
	if next, _ := none.NextStart(sat); !next.IsZero() {
		t.Errorf("zero Set NextStart = %s", next)
	}
}

func TestCompileErrors(t *testing.T) {
	ok := Window{Name: "n", Schedule: "0 2 * * *", Duration: time.Hour}
	for _, tc := range []struct {
		name   string
		edit   func(*Window)
		phrase string
	}{
		{"no name", func(w *Window) { w.Name = "" }, "name"},
		{"name with a space", func(w *Window) { w.Name = "a b" }, "name"},
		{"zero duration", func(w *Window) { w.Duration = 0 }, "duration"},
		{"too long", func(w *Window) { w.Duration = 8 * 24 * time.Hour }, "duration"},
		{"bad cron", func(w *Window) { w.Schedule = "0 25 * * *" }, "schedule"},
		{"six fields", func(w *Window) { w.Schedule = "0 0 2 * * *" }, "schedule"},
		{"@every is not anchored", func(w *Window) { w.Schedule = "@every 1h" }, "schedule"},
		{"zone in the schedule", func(w *Window) { w.Schedule = "CRON_TZ=UTC 0 2 * * *" }, "schedule"},
		{"never starts", func(w *Window) { w.Schedule = "0 0 30 2 *" }, "never starts"},
		{"unknown zone", func(w *Window) { w.TimeZone = "Mars/Olympus" }, "time_zone"},
		{"Local is host-dependent", func(w *Window) { w.TimeZone = "Local" }, "time_zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ok
			tc.edit(&w)
			err := w.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.phrase) {
				t.Errorf("Validate(%+v) = %v, want ErrInvalid naming %s", w, err, tc.phrase)
			}
		})
	}
	for _, spec := range []string{"@daily", "@weekly", "*/30 * * * *", "0 2 * * mon-fri", "0 2 1 jan,jul *"} {
		w := ok
		w.Schedule = spec
		if err := w.Validate(); err != nil {
			t.Errorf("Validate(schedule %q) = %v", spec, err)
		}
	}
}

// The window parser takes operators' (and the server's) text: it never
// panics, and a window it accepts answers Active and NextStart.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"0 2 * * *", "@daily", "*/5 1-3 * jan mon", "0 0 30 2 *", "61 * * * *", "", "@every 1h", "? ? ? ? ?", "0 0 L * *"} {
		f.Add(s, "Europe/Berlin", int64(time.Hour))
	}
	f.Fuzz(func(t *testing.T, spec, tz string, d int64) {
		w := Window{Name: "f", Schedule: spec, Duration: time.Duration(d), TimeZone: tz}
		c, err := w.Compile()
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile error %v does not wrap ErrInvalid", err)
			}
			return
		}
		at := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
		if n := c.NextStart(at); !n.IsZero() && !n.After(at) {
			t.Fatalf("NextStart(%s) = %s, not after", at, n)
		}
		if active, end := c.Active(at); active && !end.After(at) {
			t.Fatalf("Active(%s) ends %s, not after", at, end)
		}
	})
}
