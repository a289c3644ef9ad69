package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A run whose disks another probe holds for its whole timeout never calls
// the engine; it is counted as skipped for lock-timeout and reported with
// the failure text that says who held what.
func TestLockTimeoutReport(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "db1")
	c := testConfig("127.0.0.1:1", p, t.TempDir())
	fp := &fakeProber{}
	a := newTestAgent(t, c, p, fp.run, fakeInventory("/data1"))
	held, err := a.locks.acquire(t.Context(), []string{"sdb"})
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	d, err := fakeInventory("/data1")(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tg := targetsFor(d.Inventory.GetVolumes(), c.Probes)[0]
	o := a.runOptions(tg)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	res, err := a.runLocked(ctx, tg.lockKeys, o)
	var lt *lockTimeout
	if !errors.As(err, &lt) || !strings.HasPrefix(err.Error(), "another probe held [sdb] for the whole run timeout of ") {
		t.Fatalf("runLocked with sdb held = %v, want the lock timeout", err)
	}
	if fp.runs != 0 {
		t.Errorf("the engine ran %d times without the disk lock", fp.runs)
	}
	runReport{a: a, t: tg, o: o}.notRun(res, err)
	kind := string(tg.kind)
	if got := testutil.ToFloat64(a.metrics.probeRuns.WithLabelValues(kind, "skipped")); got != 1 {
		t.Errorf("skipped runs = %g, want 1", got)
	}
	if got := testutil.ToFloat64(a.metrics.probeSkips.WithLabelValues(kind, vocab.StopLockTimeout)); got != 1 {
		t.Errorf("lock-timeout skips = %g, want 1", got)
	}
	if r := notRun(o, res, vocab.StopLockTimeout, err); r.Failure != err.Error() || r.StoppedReason != vocab.StopLockTimeout || !r.Skipped {
		t.Errorf("the reported run = %+v: want skipped, lock-timeout, failure %q", r, err)
	}
}
