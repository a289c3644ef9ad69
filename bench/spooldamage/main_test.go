package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDamagedSpoolMatrix runs one case per recovery path of the damaged
// spool (fastCases; `go run ./bench/spooldamage` runs the full matrix) on
// both engines: in every case each record the agent generated is stored
// exactly once, or counted lost with its reason when the damage destroyed
// its bytes — exactly those (result.check).
//
// The cases of an engine run at once, each in its own goroutine (each
// with its own server, store and agent): they spend their time waiting
// for records to be spooled and delivered, not on the CPU, and t.Parallel
// alone would run only GOMAXPROCS of them at a time.
func TestDamagedSpoolMatrix(t *testing.T) {
	t.Parallel()
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			var wg sync.WaitGroup
			for _, c := range matrix(true) {
				dsn := e.DSN(t)
				dir := filepath.Join(t.TempDir(), "case")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					res, err := runCase(context.Background(), dir, dsn, c)
					if err != nil {
						t.Errorf("%s: %v", c, err)
						return
					}
					t.Logf("%s: generated %d, stored %d, destroyed %d, lost %v", c, res.Generated, res.Stored, res.Destroyed, res.Lost)
				})
			}
			wg.Wait()
		})
	}
}

// TestDiskFullRecovers: a spool on a 128 KiB tmpfs (the bench's is 512
// KiB: the same path, filled four times sooner) that fills while the
// server is down frees itself once the server is back, says so in its
// log and counts what it dropped, and every record it spooled is stored
// once.
func TestDiskFullRecovers(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs Linux and root")
	}
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			res, err := runDiskFull(context.Background(), t.TempDir(), e.DSN(t), 128<<10)
			if err != nil {
				t.Fatal(err)
			}
			if res.Dropped == 0 {
				t.Errorf("%s: no append refused for want of space", res)
			}
			t.Log(res)
		})
	}
}
