package bytesize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"4096", 4096},
		{"512B", 512},
		{"8KiB", 8 << 10},
		{"64K", 64 << 10},
		{"256MiB", 256 << 20},
		{"1GiB", 1 << 30},
		{" 2 TiB ", 2 << 40},
		// Every spelling of a unit is the same power of 1024.
		{"64k", 64 << 10},
		{"64kb", 64 << 10},
		{"64KB", 64 << 10},
		{"64kB", 64 << 10},
		{"64kib", 64 << 10},
		{"64KIB", 64 << 10},
		{"8 KB", 8 << 10},
		{"1m", 1 << 20},
		{"1MB", 1 << 20},
		{"2gb", 2 << 30},
		{"1t", 1 << 40},
		{"512b", 512},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "KiB", "k", "1.5GiB", "-1", "+1", "8 K B", "99999999999TiB", "1Ki", "1kbit", "64XB", "1e3", "1PiB", "99999999999999999999"} {
		if got, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %d, %v; want ErrSyntax", in, got, err)
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []Size{0, 1, 512, 4096, 32256, 65536, 1 << 20, 5 << 30, 3 << 40} {
		got, err := Parse(s.String())
		if err != nil || got != s {
			t.Errorf("Parse(%q) = %d, %v; want %d", s.String(), got, err, s)
		}
	}
	if got := Size(32256).String(); got != "32256B" {
		t.Errorf("Size(32256).String() = %q, want 32256B", got)
	}
	if got := (64 * KiB).String(); got != "64KiB" {
		t.Errorf("(64KiB).String() = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"8KiB", "1GiB", "0", "x", "18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(n.String())
		if err != nil || back != n {
			t.Fatalf("Parse(%q)=%d; round trip via %q = %d, %v", s, n, n.String(), back, err)
		}
	})
}

func TestHuman(t *testing.T) {
	t.Parallel()
	for n, want := range map[Size]string{
		0: "0", 1: "1B", 512: "512B", 4096: "4KiB", 32256: "31.5KiB", 32257: "32257B",
		1536: "1.5KiB", 64 << 10: "64KiB", 1 << 20: "1MiB", 135266304: "129MiB", 3 << 39: "1.5TiB",
		1<<64 - 1: "18446744073709551615B", 1 << 63: "8388608TiB",
	} {
		if got := n.Human(); got != want {
			t.Errorf("Size(%d).Human() = %q, want %q", uint64(n), got, want)
		}
	}
}
