package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/config"
	"github.com/plumbline/plumbline/internal/ingest"
	"github.com/plumbline/plumbline/internal/probe"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestRefusedRunReported: a run the probe refuses (here the schedule's
// free-space floor, min_free, is larger than any disk) reaches the server
// as a probe result with stopped_reason refused and the probe's message,
// one the server's validation accepts, and is counted in the agent's
// metrics. Before, a refused run was only logged: the server never heard.
func TestRefusedRunReported(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	c.Probes[0].Every = time.Hour
	c.Probes[0].Kinds = []probe.Kind{probe.LogWrite}
	huge := config.MinFree(1 << 60)
	c.Probes[0].MinFree = &huge
	a := newTestAgent(t, c, p, probe.Run, fakeInventory("/data1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var got *plumblinev1.Record
	waitFor(t, "a probe result at the server", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, r := range srv.stored {
			if r.GetProbe() != nil {
				got = r
				return true
			}
		}
		return false
	})
	cancel()
	<-done
	pr := got.GetProbe()
	if pr.GetStoppedReason() != probe.StopRefused || !pr.GetSkipped() || pr.GetOps() != 0 ||
		!strings.Contains(pr.GetFailure(), "not enough free space") || pr.GetMountPoint() != "/data1" || pr.GetKind() != "log-write" || pr.GetSync() != "dsync" {
		t.Errorf("probe result = %v, want a refused log-write run of /data1 with the free-space message", pr)
	}
	b, err := ingest.ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{got}}, ingest.DefaultLimits(), time.Now())
	if err != nil || len(b.Rejections) != 0 {
		t.Errorf("the server's validation: %v, rejections %v", err, b.Rejections)
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `plumbline_agent_probe_skips_total{kind="log-write",reason="refused"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %s:\n%s", want, rec.Body)
	}
}
