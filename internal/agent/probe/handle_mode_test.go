package probe

import (
	"errors"
	"testing"
)

// TestHandleBypassesCache: cache_bypass is claimed only when Windows
// confirms FILE_NO_INTERMEDIATE_BUFFERING on the handle; a failed query or
// a mode without it is no confirmation.
func TestHandleBypassesCache(t *testing.T) {
	tests := []struct {
		mode uint32
		err  error
		want bool
	}{
		{fileNoIntermediateBuffered | fileWriteThrough, nil, true},
		{fileNoIntermediateBuffered, nil, true},
		{fileWriteThrough, nil, false},
		{0x20, nil, false}, // FILE_SYNCHRONOUS_IO_NONALERT only: a cached handle
		{0, nil, false},
		{fileNoIntermediateBuffered | fileWriteThrough, errors.New("STATUS_NOT_IMPLEMENTED"), false},
	}
	for _, tc := range tests {
		if got := handleBypassesCache(tc.mode, tc.err); got != tc.want {
			t.Errorf("handleBypassesCache(%#x, %v) = %v, want %v", tc.mode, tc.err, got, tc.want)
		}
	}
}
