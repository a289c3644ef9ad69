package probe

import (
	"errors"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The engine runs exactly the kinds vocab reports: a listed but reserved
// kind (stripe-scan) is refused as invalid options, before any file is
// touched.
func TestOptionsKindsFromVocab(t *testing.T) {
	for _, k := range vocab.ListedProbeKinds() {
		o := DefaultOptions()
		o.Dir, o.Kind, o.QueueDepth = t.TempDir(), k, 1
		err := o.validate()
		_, reported := vocab.LookupProbeKind(k)
		switch {
		case reported && err != nil:
			t.Errorf("%s: %v", k, err)
		case !reported && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: validate() = %v, want ErrInvalid for a kind with no engine", k, err)
		case !reported && !strings.Contains(err.Error(), `kind "`+string(k)+`": want one of random-read, random-write, log-write`):
			t.Errorf("%s: %v: want the kind named", k, err)
		}
	}
}
