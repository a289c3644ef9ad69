package main

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/plumbline/plumbline/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDamagedSpoolMatrix runs the pruned damaged-spool matrix on both
// engines: in every case each record the agent generated is stored
// exactly once, or counted lost with its reason when the damage destroyed
// its bytes — exactly those (result.check).
func TestDamagedSpoolMatrix(t *testing.T) {
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			for _, c := range matrix(true) {
				t.Run(c.String(), func(t *testing.T) {
					t.Parallel()
					res, err := runCase(context.Background(), t.TempDir(), e.DSN(t), c)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("generated %d, stored %d, destroyed %d, lost %v", res.Generated, res.Stored, res.Destroyed, res.Lost)
				})
			}
		})
	}
}

// TestDiskFullRecovers: a spool on a 512 KiB tmpfs that fills while the
// server is down frees itself once the server is back, says so in its
// log and counts what it dropped, and every record it spooled is stored
// once.
func TestDiskFullRecovers(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs Linux and root")
	}
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		res, err := runDiskFull(context.Background(), t.TempDir(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		if res.Dropped == 0 {
			t.Errorf("%s: no append refused for want of space", res)
		}
		t.Log(res)
	})
}
