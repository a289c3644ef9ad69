// Package enroll is the agent's side of enrollment and certificate
// rotation, and the formats both sides share: join tokens, token labels
// and CA pins (docs/install.md, "Enrollment").
//
// An agent enrolls with Enroll: it checks the server against a pinned CA
// (the SHA-256 of the CA certificate's SubjectPublicKeyInfo, as kubeadm's
// discovery-token-ca-cert-hash), generates its key on the host, sends a
// certificate signing request with a join token and writes DIR/ca.crt,
// DIR/agent.crt and DIR/agent.key. A running agent keeps its certificate
// fresh with a Renewer: it renews at two thirds of the lifetime over its
// own mutual-TLS connection and hot-swaps the client certificate.
//
// The server's side (issuing, tokens, revocation) is
// internal/server/authority.
package enroll

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// A join token reads plb1.<id>.<secret>: the id (10 characters) names the
// token in `server token list|revoke` and is stored as is; the secret (32
// characters, 160 bits) is stored only as its SHA-256. Both are lower-case
// base32 (a-z, 2-7), so a token survives shells, YAML and copy-paste.
const (
	tokenPrefix    = "plb1."
	tokenIDLen     = 10
	tokenSecretLen = 32
	// TokenLen is the length of every join token.
	TokenLen = len(tokenPrefix) + tokenIDLen + 1 + tokenSecretLen
)

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrToken is wrapped by ParseToken's errors.
var ErrToken = errors.New("malformed join token")

// Token is a parsed join token.
type Token struct {
	ID     string
	Secret string
}

// NewToken makes a token from crypto/rand.
func NewToken() Token {
	b := make([]byte, 30) // 30 bytes: 48 base32 characters, enough for id and secret
	rand.Read(b)          // never fails (crypto/rand)
	s := tokenEncoding.EncodeToString(b)
	return Token{ID: s[:tokenIDLen], Secret: s[tokenIDLen : tokenIDLen+tokenSecretLen]}
}

// String is the token as the operator hands it to an agent.
func (t Token) String() string { return tokenPrefix + t.ID + "." + t.Secret }

// SecretHash is what the server stores of the secret: its SHA-256, hex.
func (t Token) SecretHash() string {
	h := sha256.Sum256([]byte(t.Secret))
	return hex.EncodeToString(h[:])
}

// ParseToken parses a join token (surrounding white space ignored). Its
// errors never repeat the secret.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if len(s) != TokenLen {
		return Token{}, fmt.Errorf("%w: %d characters, want %d (plb1.<id>.<secret> as `server token create` prints it)", ErrToken, len(s), TokenLen)
	}
	if !strings.HasPrefix(s, tokenPrefix) {
		return Token{}, fmt.Errorf("%w: want the prefix %q", ErrToken, tokenPrefix)
	}
	rest := s[len(tokenPrefix):]
	if rest[tokenIDLen] != '.' {
		return Token{}, fmt.Errorf("%w: want a dot after the %d-character id", ErrToken, tokenIDLen)
	}
	t := Token{ID: rest[:tokenIDLen], Secret: rest[tokenIDLen+1:]}
	if err := CheckTokenID(t.ID); err != nil {
		return Token{}, err
	}
	if i := strings.IndexFunc(t.Secret, notBase32); i >= 0 {
		return Token{}, fmt.Errorf("%w: the secret has a character outside a-z and 2-7 at position %d", ErrToken, i)
	}
	return t, nil
}

// CheckTokenID accepts a token id (as `server token revoke` takes it).
func CheckTokenID(id string) error {
	if len(id) != tokenIDLen {
		return fmt.Errorf("%w: token id %q: want %d characters", ErrToken, truncate(id, 32), tokenIDLen)
	}
	if i := strings.IndexFunc(id, notBase32); i >= 0 {
		return fmt.Errorf("%w: token id %q: character %d is outside a-z and 2-7", ErrToken, id, i)
	}
	return nil
}

func notBase32(r rune) bool { return !('a' <= r && r <= 'z' || '2' <= r && r <= '7') }

// truncate cuts s to at most n bytes (on a rune boundary) for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
