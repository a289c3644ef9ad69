package probe

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHeaderRoundTrip(t *testing.T) {
	want := header{FileSize: 64 << 20, State: stateReady, Created: time.Unix(1700000000, 123).UTC(), ID: [16]byte{1, 2, 3}}
	got, err := parseHeader(want.marshal())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseHeader(marshal()) mismatch (-want +got):\n%s", diff)
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	good := header{FileSize: 64 << 20, State: stateReady, Created: time.Unix(1, 0)}.marshal()
	tests := map[string]func(b []byte) []byte{
		"empty":        func(b []byte) []byte { return nil },
		"short":        func(b []byte) []byte { return b[:60] },
		"zeros":        func(b []byte) []byte { return make([]byte, len(b)) },
		"other magic":  func(b []byte) []byte { b[0] = 'X'; return b },
		"bad checksum": func(b []byte) []byte { b[30] ^= 1; return b },
		"sqlite file":  func(b []byte) []byte { return append([]byte("SQLite format 3\x00"), b[16:]...) },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			b := mutate(append([]byte(nil), good...))
			if _, err := parseHeader(b); !errors.Is(err, errHeader) {
				t.Errorf("parseHeader(%s) = %v, want errHeader", name, err)
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(header{FileSize: 64 << 20, State: stateReady}.marshal())
	f.Add(header{FileSize: 2 << 20, State: stateFilling}.marshal()[:headerFixed])
	f.Add([]byte("PLUMBLINE PROBE\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		// Anything accepted must re-encode to the same fixed fields.
		again, err := parseHeader(h.marshal())
		if err != nil {
			t.Fatalf("re-parse of accepted header: %v", err)
		}
		if again != h {
			t.Fatalf("re-parse = %+v, want %+v", again, h)
		}
	})
}
