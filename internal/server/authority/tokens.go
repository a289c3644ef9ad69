package authority

import (
	"context"
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Token bounds.
const (
	DefaultTokenTTL = 24 * time.Hour
	MaxTokenTTL     = 365 * 24 * time.Hour
	MaxTokenUses    = 1_000_000
)

// TokenSpec is what `server token create` asks for.
type TokenSpec struct {
	TTL    time.Duration // default DefaultTokenTTL
	Uses   int64         // default 1
	Labels map[string]string
}

// TokenStore keeps join tokens (*store.Store is one).
type TokenStore interface {
	CreateJoinToken(ctx context.Context, t store.JoinToken) error
}

// CreateToken makes a join token and stores it hashed. The token (with
// its secret) exists only in the answer.
func CreateToken(ctx context.Context, st TokenStore, spec TokenSpec, now time.Time) (enroll.Token, store.JoinToken, error) {
	if spec.TTL == 0 {
		spec.TTL = DefaultTokenTTL
	}
	if spec.Uses == 0 {
		spec.Uses = 1
	}
	switch {
	case spec.TTL < time.Second || spec.TTL > MaxTokenTTL:
		return enroll.Token{}, store.JoinToken{}, fmt.Errorf("--ttl %s: want 1s to %s", spec.TTL, MaxTokenTTL)
	case spec.Uses < 1 || spec.Uses > MaxTokenUses:
		return enroll.Token{}, store.JoinToken{}, fmt.Errorf("--uses %d: want 1 to %d", spec.Uses, MaxTokenUses)
	}
	// Keys are stored canonical (lower case): what a token fixes, an
	// agent cannot declare otherwise by writing the key in another case.
	lbls, err := labels.Canonical(spec.Labels)
	if err != nil {
		return enroll.Token{}, store.JoinToken{}, fmt.Errorf("--labels: %w", err)
	}
	tok := enroll.NewToken()
	jt := store.JoinToken{ID: tok.ID, SecretHash: tok.SecretHash(), Labels: lbls, MaxUses: spec.Uses, Created: now, Expires: now.Add(spec.TTL)}
	if err := st.CreateJoinToken(ctx, jt); err != nil {
		return enroll.Token{}, store.JoinToken{}, err
	}
	return tok, jt, nil
}
