//go:build linux

package deploy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// refuseUnauthenticated makes one call the server's admission refuses: a
// Hello over TLS without a client certificate (reason unauthenticated),
// so that plumbline_grpc_calls_refused_total has a series for the server
// row's refusals panel, as a misconfigured agent would give it.
func refuseUnauthenticated(t *testing.T, ctx context.Context, grpcAddr, devDir string) {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(devDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s/ca.crt: no certificate", devDir)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = plumblinev1.NewAgentServiceClient(conn).Hello(ctx, &plumblinev1.HelloRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Hello without a client certificate: %v, want Unauthenticated", err)
	}
}

// serverGauge reads one unlabelled sample from the server's /metrics (0
// when it is absent).
func serverGauge(ctx context.Context, metricsURL, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}

// waitEvaluatorSettled waits until the server's baseline evaluator has
// finished a pass that started after every record was in (fleetsim has
// exited): the first pass to finish after now may have started before,
// the one after it cannot have. It returns that pass's end
// (plumbline_evaluator_last_success_timestamp_seconds): every scrape
// showing it or later shows the baselines it judged, which no longer
// change (no more records come).
func waitEvaluatorSettled(t *testing.T, ctx context.Context, metricsURL string) float64 {
	t.Helper()
	const name = "plumbline_evaluator_last_success_timestamp_seconds"
	start := time.Now()
	last, err := serverGauge(ctx, metricsURL, name)
	if err != nil {
		t.Fatal(err)
	}
	for passes := 0; passes < 2; {
		select {
		case <-ctx.Done():
			t.Fatalf("the evaluator finished %d passes in %s after the fleet's last report, want 2", passes, time.Since(start).Round(time.Second))
		case <-time.After(250 * time.Millisecond):
		}
		v, err := serverGauge(ctx, metricsURL, name)
		if err != nil {
			t.Fatal(err)
		}
		if v > last {
			last, passes = v, passes+1
		}
	}
	t.Logf("evaluator settled %s after the fleet's last report", time.Since(start).Round(time.Millisecond))
	return last
}

// waitScraped waits until every Prometheus has scraped the server after
// its evaluator's pass that ended at passEnd (a scrape shows the
// evaluator's status and the baselines as of that pass or later).
func waitScraped(t *testing.T, ctx context.Context, proms map[string]promv1.API, passEnd float64) {
	t.Helper()
	q := fmt.Sprintf(`plumbline_evaluator_last_success_timestamp_seconds >= %f`, passEnd)
	for mode, api := range proms {
		for {
			v, err := vectorQuery(ctx, api, q)
			if err != nil {
				t.Fatalf("%s Prometheus: %v", mode, err)
			}
			if len(v) > 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s Prometheus never scraped the evaluator's settled pass: %s is empty", mode, q)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// settleFleet waits until the fleet's cohorts have formed and the last
// runs of every volume were judged against them, whatever the machine's
// load. How many runs a volume has when the fleet stops (fleetsim falls
// behind its rate on a loaded machine), and which of them met a formed
// cohort (when the evaluator's passes fell), vary; so, after each settled
// pass, topUp sends a few more runs of every volume (the same agents,
// continuing their sequences) until the volumes in cohorts
// (sum(plumbline_cohort_volumes)) stop growing: every history that
// becomes trusted is, and the last top-up was judged against cohorts
// formed before it began. Both Prometheus servers have then scraped the
// final state, which no longer changes.
func settleFleet(t *testing.T, ctx context.Context, proms map[string]promv1.API, metricsURL string, topUp func()) {
	t.Helper()
	prev := -1
	for i := 0; ; i++ {
		waitScraped(t, ctx, proms, waitEvaluatorSettled(t, ctx, metricsURL))
		v, err := vectorQuery(ctx, proms["classic"], `sum(plumbline_cohort_volumes)`)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if len(v) > 0 {
			n = int(v[0].Value)
		}
		t.Logf("volumes in cohorts after %d top-ups: %d", i, n)
		if n > 0 && n == prev {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the volumes in cohorts still change after %d top-ups", i)
		}
		prev = n
		topUp()
	}
}
