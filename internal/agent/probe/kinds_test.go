package probe

import (
	"errors"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The engine runs exactly the kinds vocab marks Probed (stripe-scan
// included, though the server does not take its results yet); an unknown
// kind is refused as invalid options, before any file is touched.
func TestOptionsKindsFromVocab(t *testing.T) {
	for _, k := range append(vocab.ListedProbeKinds(), "seq-read") {
		o := DefaultOptions()
		o.Dir, o.Kind, o.QueueDepth = t.TempDir(), k, 1
		err := o.validate()
		_, probed := vocab.LookupProbedKind(k)
		switch {
		case probed && err != nil:
			t.Errorf("%s: %v", k, err)
		case !probed && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: validate() = %v, want ErrInvalid for a kind with no engine", k, err)
		case !probed && !strings.Contains(err.Error(), `kind "`+string(k)+`": want one of random-read, random-write, log-write, stripe-scan`):
			t.Errorf("%s: %v: want the kind named", k, err)
		}
	}
}
