package agent

import "time"

// Backoff is the wait before reconnect attempt n (n ≥ 1) with "full
// jitter": a uniform draw from [0, min(ceiling, base·2^(n-1))), given the
// draw r in [0, 1). Spreading each wait over the whole range keeps a fleet
// whose server restarted from reconnecting in lockstep.
func Backoff(n int, base, ceiling time.Duration, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	if r < 0 {
		r = 0
	}
	if r >= 1 {
		r = 0.999999
	}
	d := ceiling
	if n <= 62 && base > 0 && base <= ceiling>>(n-1) {
		d = base << (n - 1)
	}
	return time.Duration(float64(d) * r)
}
