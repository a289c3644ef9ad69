// Package bytesize parses and formats byte sizes written with IEC suffixes
// ("8KiB", "256MiB", "1GiB"), as used by the agent's flags and config file.
package bytesize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Size is a number of bytes. It unmarshals from YAML as an integer or an
// IEC-suffixed string.
type Size uint64

// Common sizes.
const (
	B   Size = 1
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

var suffixes = []struct {
	name string
	mult Size
}{
	// Longest first so that "KiB" is tried before "B".
	{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
	{"T", TiB}, {"G", GiB}, {"M", MiB}, {"K", KiB},
	{"B", B},
}

// ErrSyntax is returned (wrapped) for a size that cannot be parsed.
var ErrSyntax = errors.New("invalid size")

// Parse reads a size such as "4096", "8KiB", "64K" or "1GiB". Decimal SI
// suffixes (kB, MB, GB) are refused rather than guessed at.
func Parse(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w %q: empty", ErrSyntax, s)
	}
	mult := B
	num := t
	for _, sfx := range suffixes {
		if strings.HasSuffix(t, sfx.name) {
			num = strings.TrimSpace(strings.TrimSuffix(t, sfx.name))
			mult = sfx.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want a whole number with an optional IEC suffix (KiB, MiB, GiB, TiB)", ErrSyntax, s)
	}
	if n != 0 && uint64(mult) > ^uint64(0)/n {
		return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
	}
	return Size(n) * mult, nil
}

// String formats the size with the largest IEC suffix that divides it exactly.
func (s Size) String() string {
	for _, sfx := range suffixes[:4] {
		if s >= sfx.mult && s%sfx.mult == 0 {
			return strconv.FormatUint(uint64(s/sfx.mult), 10) + sfx.name
		}
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// Set implements flag.Value.
func (s *Size) Set(v string) error {
	n, err := Parse(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler (YAML and flags).
func (s *Size) UnmarshalText(b []byte) error { return s.Set(string(b)) }

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
