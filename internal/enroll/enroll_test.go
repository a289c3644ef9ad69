package enroll

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/server/devca"
)

func TestTokenRoundTrip(t *testing.T) {
	tok := NewToken()
	got, err := ParseToken("  " + tok.String() + "\n")
	if err != nil || got != tok {
		t.Fatalf("ParseToken(%q) = %+v, %v; want %+v", tok, got, err, tok)
	}
	if NewToken() == tok {
		t.Error("two NewToken calls gave the same token")
	}
	for _, bad := range []string{"", "plb1.", tok.String() + "a", strings.Replace(tok.String(), "plb1.", "plb2.", 1),
		tok.String()[:15] + "-" + tok.String()[16:], strings.ToUpper(tok.String())} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		} else if strings.Contains(err.Error(), tok.Secret) {
			t.Errorf("ParseToken(%q) error repeats the secret: %v", bad, err)
		}
	}
}

func TestPin(t *testing.T) {
	ca, err := devca.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pin := Pin(ca.Cert)
	if p, err := ParsePin(strings.ToUpper(pin)); err != nil || p != pin {
		t.Errorf("ParsePin(upper) = %q, %v", p, err)
	}
	if c, err := PinnedCert(ca.CertPEM, pin); err != nil || !c.Equal(ca.Cert) {
		t.Errorf("PinnedCert = %v, %v", c, err)
	}
	other, _ := devca.Create(t.TempDir())
	if _, err := PinnedCert(other.CertPEM, pin); err == nil {
		t.Error("PinnedCert matched another CA")
	}
	for _, bad := range []string{"", "sha256:", "md5:" + pin[7:], pin + "00", pin[:20]} {
		if _, err := ParsePin(bad); err == nil {
			t.Errorf("ParsePin(%q) accepted", bad)
		}
	}
}

// TestLoadKeyPairFinishesReplacement: a crash at each step of writePair
// leaves a pair LoadKeyPair loads, and it is the new one once both new
// files were complete.
func TestLoadKeyPairFinishesReplacement(t *testing.T) {
	ca, err := devca.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf, _ := ca.IssueAgent("a")
	newLeaf, _ := ca.IssueAgent("a")
	for _, step := range []struct {
		name    string
		crash   func(cert, key string)
		wantNew bool
	}{
		{"after the new key", func(cert, key string) { os.WriteFile(key+".new", newLeaf.KeyPEM, 0o600) }, false},
		{"after both new files", func(cert, key string) {
			os.WriteFile(key+".new", newLeaf.KeyPEM, 0o600)
			os.WriteFile(cert+".new", newLeaf.CertPEM, 0o644)
		}, true},
		{"after the key rename", func(cert, key string) {
			os.WriteFile(key, newLeaf.KeyPEM, 0o600)
			os.WriteFile(cert+".new", newLeaf.CertPEM, 0o644)
		}, true},
		{"a stray certificate", func(cert, key string) { os.WriteFile(cert+".new", []byte("junk"), 0o644) }, false},
	} {
		t.Run(step.name, func(t *testing.T) {
			dir := t.TempDir()
			cert, key := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
			if err := oldLeaf.WriteFiles(cert, key); err != nil {
				t.Fatal(err)
			}
			step.crash(cert, key)
			pair, err := LoadKeyPair(cert, key)
			if err != nil {
				t.Fatalf("LoadKeyPair: %v", err)
			}
			want := oldLeaf
			if step.wantNew {
				want = newLeaf
			}
			if !bytes.Equal(pair.Certificate[0], want.Cert.Raw) {
				t.Errorf("loaded the %v pair", map[bool]string{true: "old", false: "new"}[step.wantNew])
			}
			if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
				t.Errorf("files left behind do not form a pair: %v", err)
			}
		})
	}
}

// FuzzParseToken: any bytes give a token that prints back as itself, or
// an error without the input's secret part.
func FuzzParseToken(f *testing.F) {
	f.Add(NewToken().String())
	f.Add("plb1.aaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	f.Add("plb1.")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if tok.String() != strings.TrimSpace(s) {
			t.Fatalf("ParseToken(%q).String() = %q", s, tok.String())
		}
		if CheckTokenID(tok.ID) != nil {
			t.Fatalf("ParseToken(%q) gave a bad id %q", s, tok.ID)
		}
	})
}

// FuzzPinnedCert: a trust bundle from the network never panics, and a
// match is a CA certificate with exactly that pin.
func FuzzPinnedCert(f *testing.F) {
	ca, err := devca.Create(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.CertPEM, Pin(ca.Cert))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), Pin(ca.Cert))
	f.Fuzz(func(t *testing.T, bundle []byte, pin string) {
		c, err := PinnedCert(bundle, pin)
		if err == nil && (Pin(c) != pin || !c.IsCA) {
			t.Fatalf("PinnedCert matched %s for pin %q", Pin(c), pin)
		}
	})
}
