package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
)

// A new mount table fingerprint runs discovery once ("changed"); the same
// one does not.
func TestGeometryOnMountChange(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.Spool.Dir = filepath.Join(t.TempDir(), "spool")
	c.Intervals.GeometryRefresh = time.Hour
	var calls atomic.Int32
	vols := []string{"/data1"}
	var mu sync.Mutex
	discover := func(ctx context.Context) (Discovery, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return fakeInventory(vols...)(ctx)
	}
	a, err := New(Options{Config: c, AgentID: "db1", Discover: discover, MountPoll: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.spool.Close()
	mt := &fakeMountTable{}
	mt.fp.Store(1)
	a.mounts = mt

	ctx, cancel := context.WithCancel(context.Background())
	sched := &scheduler{a: a, running: map[string]context.CancelFunc{}}
	var wg sync.WaitGroup
	wg.Go(func() { a.geometryLoop(ctx, sched) })
	defer func() { cancel(); wg.Wait(); sched.stop() }()

	// n more polls of the table: the loop has acted on n-1 of them.
	polled := func(n int64) {
		t.Helper()
		from := mt.polls.Load()
		waitFor(t, fmt.Sprintf("%d polls of the mount table", n), func() bool { return mt.polls.Load() >= from+n })
	}
	waitFor(t, "discovery at start", func() bool { return calls.Load() == 1 })
	polled(11) // ten polls of an unchanged table
	if n := calls.Load(); n != 1 {
		t.Fatalf("discoveries with an unchanged mount table = %d, want 1", n)
	}
	mu.Lock()
	vols = []string{"/data1", "/data2"}
	mu.Unlock()
	mt.fp.Store(2)
	waitFor(t, "discovery after the mount table changed", func() bool { return calls.Load() == 2 })
	polled(11)
	if n := calls.Load(); n != 2 {
		t.Errorf("discoveries after one change = %d, want 2", n)
	}
}

// On Linux the mount table is <procfs>/self/mountinfo.
func TestProcMountinfoFingerprint(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mt := newMountTable(root)
	if fp := mt.fingerprint(); fp != 0 {
		t.Errorf("fingerprint without mountinfo = %d, want 0", fp)
	}
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	p := filepath.Join(root, "self", "mountinfo")
	os.WriteFile(p, []byte("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o644)
	a := mt.fingerprint()
	os.WriteFile(p, []byte("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 8:17 / /data rw - xfs /dev/sdb1 rw\n"), 0o644)
	if b := mt.fingerprint(); a == 0 || b == 0 || a == b {
		t.Errorf("fingerprints before and after a mount = %d, %d; want two different non-zero values", a, b)
	}
}
