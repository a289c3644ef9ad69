package maintenance

import (
	"fmt"
	"time"
)

// Set is a list of compiled windows; the zero Set has none.
type Set struct {
	windows []Compiled
}

// Compile compiles every window; the error names the first bad one.
func Compile(ws []Window) (Set, error) {
	var s Set
	for i, w := range ws {
		c, err := w.Compile()
		if err != nil {
			return Set{}, fmt.Errorf("maintenance_windows[%d]: %w", i, err)
		}
		s.windows = append(s.windows, c)
	}
	return s, nil
}

// Len is the number of windows.
func (s Set) Len() int { return len(s.windows) }

// Windows returns the windows as configured.
func (s Set) Windows() []Window {
	out := make([]Window, len(s.windows))
	for i, c := range s.windows {
		out[i] = c.Window
	}
	return out
}

// Active returns the name of a window holding t ("" when none) and when
// it ends (the latest end among the windows active at t).
func (s Set) Active(t time.Time) (name string, end time.Time) {
	for _, c := range s.windows {
		if ok, e := c.Active(t); ok {
			if name == "" {
				name = c.Name
			}
			if e.After(end) {
				end = e
			}
		}
	}
	return name, end
}

// NextStart is the earliest start of any window after t, and its name
// (zero time: none).
func (s Set) NextStart(t time.Time) (time.Time, string) {
	var next time.Time
	var name string
	for _, c := range s.windows {
		if n := c.NextStart(t); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next, name = n, c.Name
		}
	}
	return next, name
}
