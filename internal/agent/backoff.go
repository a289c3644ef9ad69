package agent

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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

// RetryAfter is the wait a refused call's server asked for: the RetryInfo
// detail of a ResourceExhausted or Unavailable status (admission's
// refusals: the server at capacity, the agent over its rate), stretched
// by the draw r in [0, 1) to [d, 2d) so that agents refused together do
// not come back together, and capped at ceiling. ok is false when err
// carries no such hint.
func RetryAfter(err error, ceiling time.Duration, r float64) (wait time.Duration, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable {
		return 0, false
	}
	for _, d := range st.Details() {
		ri, isRetry := d.(*errdetails.RetryInfo)
		if !isRetry {
			continue
		}
		d := ri.GetRetryDelay().AsDuration()
		if d <= 0 {
			return 0, false
		}
		r = min(max(r, 0), 0.999999)
		return min(d+time.Duration(float64(d)*r), ceiling), true
	}
	return 0, false
}
