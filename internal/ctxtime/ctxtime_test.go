package ctxtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		cancel  time.Duration // cancel ctx this long after the start; 0: never
		want    error
		wantDur time.Duration // fake time that passes inside Sleep
	}{
		{name: "elapses", d: time.Minute, want: nil, wantDur: time.Minute},
		{name: "cancelled first", d: time.Hour, cancel: time.Second, want: context.Canceled, wantDur: time.Second},
		{name: "zero does not wait", d: 0, want: nil, wantDur: 0},
		{name: "negative does not wait", d: -time.Second, want: nil, wantDur: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				start := time.Now()
				err := Sleep(ctx, tc.d)
				if !errors.Is(err, tc.want) {
					t.Errorf("Sleep(ctx, %v) = %v, want %v", tc.d, err, tc.want)
				}
				if got := time.Since(start); got != tc.wantDur {
					t.Errorf("Sleep(ctx, %v) took %v of fake time, want %v", tc.d, got, tc.wantDur)
				}
			})
		})
	}
}

func TestSleepEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, d := range []time.Duration{-time.Second, 0, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(cancelled ctx, %v) = %v, want %v", d, err, context.Canceled)
		}
	}
}

func TestSleepDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sleep past the deadline = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		var at []time.Duration
		Every(ctx, 10*time.Second, func(fctx context.Context) {
			if fctx != ctx {
				t.Error("f got another context than Every's")
			}
			at = append(at, time.Since(start))
			if len(at) == 3 {
				cancel()
			}
		})
		want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}
		if len(at) != len(want) {
			t.Fatalf("f called at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("call %d at %v, want %v", i, at[i], want[i])
			}
		}
	})
}

// A call that overruns the period is followed by the next at once; the
// ticks missed meanwhile are dropped, not queued.
func TestEveryOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		var at []time.Duration
		Every(ctx, 10*time.Second, func(context.Context) {
			at = append(at, time.Since(start))
			switch len(at) {
			case 1:
				time.Sleep(35 * time.Second) // misses the ticks at 20s, 30s and 40s
			case 3:
				cancel()
			}
		})
		want := []time.Duration{10 * time.Second, 45 * time.Second, 50 * time.Second}
		if len(at) != len(want) {
			t.Fatalf("f called at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("call %d at %v, want %v", i, at[i], want[i])
			}
		}
	})
}

func TestEveryStopsBeforeFirstTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		calls := 0
		start := time.Now()
		Every(ctx, time.Hour, func(context.Context) { calls++ })
		if calls != 0 {
			t.Errorf("f called %d times before the first tick, want 0", calls)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Every returned after %v of fake time, want %v (when ctx ended)", got, time.Second)
		}
	})
}
