package agent

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func refusal(t *testing.T, code codes.Code, wait time.Duration) error {
	t.Helper()
	st, err := status.New(code, "refused").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// A refusal with the server's retry hint is waited out with jitter
// (between the hint and twice it, capped); anything else is not a hint.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		r       float64
		want    time.Duration
		wantOK  bool
		ceiling time.Duration
	}{
		{"busy, no jitter", refusal(t, codes.Unavailable, time.Second), 0, time.Second, true, time.Minute},
		{"busy, half jitter", refusal(t, codes.Unavailable, time.Second), 0.5, 1500 * time.Millisecond, true, time.Minute},
		{"rate, capped", refusal(t, codes.ResourceExhausted, time.Minute), 0.9, 30 * time.Second, true, 30 * time.Second},
		{"other code", refusal(t, codes.PermissionDenied, time.Second), 0, 0, false, time.Minute},
		{"no hint", status.Error(codes.Unavailable, "store unavailable"), 0, 0, false, time.Minute},
		{"not a status", errors.New("eof"), 0, 0, false, time.Minute},
		{"no error", nil, 0, 0, false, time.Minute},
	} {
		got, ok := RetryAfter(c.err, c.ceiling, c.r)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}
