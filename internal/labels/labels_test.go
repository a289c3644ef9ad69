package labels

import (
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"role", "Role", "TEAM", "k8s.io/zone", "team/owner", "a", "a.b-c_d", "Example.COM/Zone-1", strings.Repeat("a", 63)} {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", "-a", "a-", "_a", "a b", "a=b", "a,b", "/a", "k8s.io/", "a/b/c", "k8s..io/zone", "-k8s.io/zone", "é", strings.Repeat("a", 64), strings.Repeat("a", 254) + "/b"} {
		if err := CheckKey(k); err == nil {
			t.Errorf("CheckKey(%q) = nil, want an error", k)
		}
	}
}

func TestCheckValue(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "db", "dba@example.com", "eu-west/1", "rack 4", "Zürich", strings.Repeat("x", 128)} {
		if err := CheckValue(v); err != nil {
			t.Errorf("CheckValue(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{"a,b", " a", "a ", "a\tb", "a\nb", "\x1b[31m", "a\x00", "\u202eevil", "a\u2066b", "\u200fx", "\x7f", "\u0085", "\xff", strings.Repeat("x", 129)} {
		if err := CheckValue(v); err == nil {
			t.Errorf("CheckValue(%q) = nil, want an error", v)
		}
	}
}

func TestCaseFolding(t *testing.T) {
	t.Parallel()
	if err := Check(map[string]string{"Role": "db", "role": "web"}); err == nil || !strings.Contains(err.Error(), "case-insensitive") {
		t.Errorf("Check(Role, role) = %v, want a case-insensitive clash", err)
	}
	got, err := Canonical(map[string]string{"Role": "DB", "K8s.IO/Zone": "a"})
	if want := map[string]string{"role": "DB", "k8s.io/zone": "a"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("Canonical = %v, %v; want %v", got, err, want)
	}
	if _, err := Parse("Role=db,role=web"); err == nil {
		t.Error("Parse(Role=db,role=web) accepted")
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "Samsung SSD 870", "ünïcødé 日本", "\ufffd written as such", "a→b"} {
		if err := CheckText(s); err != nil {
			t.Errorf("CheckText(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"a\x00", "\x1b]0;x\x07", "a\r\nb", "tab\t", "\x7f", "\u009b31m", "\u202e", "\u202a", "\u2066", "\u2069", "\u200e", "\u200f", "\xc3", "\xed\xa0\x80"} {
		if err := CheckText(s); err == nil {
			t.Errorf("CheckText(%q) = nil, want an error", s)
		}
	}
}

// FuzzParse: what Parse accepts passes Check, has canonical keys, is
// printable, and formats back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"role=db, site=ams-1,team/owner=dba@x", "Role=DB", "k8s.io/zone=a", "a=", "a=\u202e", "a=b,A=c", ",", "=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			return
		}
		if err := Check(m); err != nil {
			t.Fatalf("Parse(%q) = %v failing Check: %v", s, m, err)
		}
		for k, v := range m {
			if k != CanonicalKey(k) {
				t.Fatalf("Parse(%q): key %q not canonical", s, k)
			}
			if CheckText(k+v) != nil || !utf8.ValidString(v) {
				t.Fatalf("Parse(%q): %q=%q not printable", s, k, v)
			}
		}
		back, err := Parse(Format(m))
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("Parse(Format(%v)) = %v, %v", m, back, err)
		}
	})
}

// FuzzCheckText: accepted text is valid UTF-8 without any rune Printable
// refuses.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"abc", "\x1b", "\u202e", "\xff", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckText(s) != nil {
			return
		}
		if !utf8.ValidString(s) {
			t.Fatalf("CheckText(%q) accepted invalid UTF-8", s)
		}
		for _, r := range s {
			if !Printable(r) {
				t.Fatalf("CheckText(%q) accepted %U", s, r)
			}
		}
	})
}

// Parse reads --labels; Format writes what it reads.
func TestParse(t *testing.T) {
	got, err := Parse("role=db, site=ams-1,team/owner=dba@x")
	want := map[string]string{"role": "db", "site": "ams-1", "team/owner": "dba@x"}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("Parse = %v, %v; want %v", got, err, want)
	}
	if s := Format(want); s != "role=db,site=ams-1,team/owner=dba@x" {
		t.Errorf("Format = %q", s)
	}
	for _, bad := range []string{"role", "=x", "a=1,a=2", "-a=1", "a=1,A=2", "a=\u202eb", "a=x\ty", "a=\x1b[2J", strings.Repeat("k", 64) + "=v"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
