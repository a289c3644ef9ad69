package ingest

import (
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The server accepts exactly the probe kinds vocab reports: a listed but
// reserved kind (stripe-scan, the geometry probe to come) is refused until
// its engine exists.
func TestProbeKindsFromVocab(t *testing.T) {
	t.Parallel()
	for _, k := range vocab.ListedProbeKinds() {
		r := probeRecord(1)
		p := r.GetProbe()
		p.Kind = string(k)
		if spec, ok := vocab.LookupProbeKind(k); ok && spec.Synced {
			p.QueueDepth, p.Sync = 1, string(vocab.SyncDsync)
		}
		b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{r}}, Limits{}, testNow)
		if err != nil {
			t.Fatal(err)
		}
		_, reported := vocab.LookupProbeKind(k)
		switch {
		case reported && len(b.Rejections) != 0:
			t.Errorf("%s: rejected: %s", k, b.Rejections[0].GetReason())
		case !reported && len(b.Rejections) != 1:
			t.Errorf("%s: accepted a kind vocab does not report", k)
		case !reported && !strings.Contains(b.Rejections[0].GetReason(), `kind "`+string(k)+`": want one of random-read, random-write, log-write`):
			t.Errorf("%s: rejection %q: want the kind named", k, b.Rejections[0].GetReason())
		}
	}
	if len(vocab.ListedProbeKinds()) == len(vocab.ProbeKinds()) {
		t.Fatal("no reserved kind listed: this test would prove nothing")
	}
}
