package labels

import (
	"fmt"
	"unicode/utf8"
)

// CheckText is the one check for printable text: every label value and
// every free-text field the server stores (host facts, layer models,
// reasons, failures) passes it. It refuses text that is not UTF-8 and
// every character that rewrites what an operator's terminal, CSV viewer
// or browser shows: the C0 controls (NUL to US, including tab, CR and
// LF), DEL, the C1 controls (U+0080 to U+009F, among them CSI), and the
// Unicode bidirectional controls (U+200E, U+200F, U+202A to U+202E,
// U+2066 to U+2069), which reorder the text around them.
func CheckText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			return fmt.Errorf("%q is not valid UTF-8 (byte %d)", quote(s), i)
		case !Printable(r):
			return fmt.Errorf("%q: control character %U at byte %d: want printable text", quote(s), r, i)
		}
	}
	return nil
}

// Printable reports whether r may appear in stored text (CheckText).
func Printable(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return false
	case r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return false
	}
	return true
}

// validAt reports whether the U+FFFD at byte i of s was written as such
// (three bytes), not decoded from an invalid byte.
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}
