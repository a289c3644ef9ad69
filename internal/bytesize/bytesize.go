// Package bytesize parses and formats byte sizes ("8KiB", "64k", "256MB",
// "1GiB"), as used by the agents' and the server's flags and config files.
//
// Every unit is a power of 1024, whatever its spelling: K, KB and KiB (in
// any letter case) all mean 1024 bytes. These sizes are stripe units,
// block sizes, file and spool sizes, which storage tools and RAID
// controllers state in binary units even when they write "64KB" (fio's
// default kb_base, MegaCLI/storcli strip sizes, Windows' format /A:64K);
// a decimal 64000-byte stripe unit does not exist. A size meant in powers
// of 1000 is written in bytes. Output always uses the IEC spelling.
package bytesize

import (
	"errors"
	"fmt"
	"math"
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

// suffixes are the units String writes, largest first.
var suffixes = []struct {
	name string
	mult Size
}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}}

// units are the accepted suffixes, lower-cased: each unit letter alone,
// with B, or with iB.
var units = map[string]Size{
	"": B, "b": B,
	"k": KiB, "kb": KiB, "kib": KiB,
	"m": MiB, "mb": MiB, "mib": MiB,
	"g": GiB, "gb": GiB, "gib": GiB,
	"t": TiB, "tb": TiB, "tib": TiB,
}

// ErrSyntax is returned (wrapped) for a size that cannot be parsed.
var ErrSyntax = errors.New("invalid size")

// Parse reads a size such as "4096", "8KiB", "64k", "64 KB" or "1GiB": a
// whole number and an optional unit, K, M, G or T, alone or followed by B
// or iB, in any letter case; every unit is a power of 1024.
func Parse(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w %q: empty", ErrSyntax, s)
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := units[unit]
	n, err := strconv.ParseUint(num, 10, 64)
	if !ok || err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
		}
		return 0, fmt.Errorf("%w %q: want a whole number of bytes with an optional unit, K, M, G or T (KiB, KB and K all mean 1024)", ErrSyntax, s)
	}
	if n != 0 && uint64(mult) > ^uint64(0)/n {
		return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
	}
	return Size(n) * mult, nil
}

// String formats the size with the largest IEC suffix that divides it exactly.
func (s Size) String() string {
	for _, sfx := range suffixes {
		if s >= sfx.mult && s%sfx.mult == 0 {
			return strconv.FormatUint(uint64(s/sfx.mult), 10) + sfx.name
		}
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// Human formats the size for people: the largest binary unit it is a
// whole or half multiple of ("4KiB", "31.5KiB", "1MiB"), else bytes
// ("32257B"); 0 is "0". Unlike String, it need not parse back.
func (s Size) Human() string {
	if s == 0 {
		return "0"
	}
	for _, sfx := range suffixes {
		if s < sfx.mult {
			continue
		}
		if s%sfx.mult == 0 {
			return strconv.FormatUint(uint64(s/sfx.mult), 10) + sfx.name
		}
		if s <= math.MaxUint64/2 && (s*2)%sfx.mult == 0 {
			return strconv.FormatFloat(float64(s)/float64(sfx.mult), 'f', 1, 64) + sfx.name
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
