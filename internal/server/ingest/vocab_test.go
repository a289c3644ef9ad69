package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The server accepts exactly the probe kinds vocab reports, and names them
// all when it refuses another.
func TestProbeKindsFromVocab(t *testing.T) {
	t.Parallel()
	for _, k := range append(vocab.ListedProbeKinds(), "sequential-scan") {
		r := probeRecord(1)
		p := r.GetProbe()
		p.Kind = string(k)
		spec, reported := vocab.LookupProbeKind(k)
		if spec.Synced {
			p.QueueDepth, p.Sync = 1, string(vocab.SyncDsync)
		}
		if k == vocab.StripeScan {
			r = scanProbe(1, "/data", testNow.Add(-time.Minute), scanAnswer(0, 0))
		}
		b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{r}}, Limits{}, testNow)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case reported && len(b.Rejections) != 0:
			t.Errorf("%s: rejected: %s", k, b.Rejections[0].GetReason())
		case !reported && len(b.Rejections) != 1:
			t.Errorf("%s: accepted a kind vocab does not report", k)
		case !reported && !strings.Contains(b.Rejections[0].GetReason(), `kind "`+string(k)+`": want one of `+vocab.ProbeKindList()):
			t.Errorf("%s: rejection %q: want the kinds named", k, b.Rejections[0].GetReason())
		}
	}
}
