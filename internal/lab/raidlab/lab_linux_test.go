package raidlab

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/lab/raidlab/raidlabtest"
)

// requireLab skips (or under CI=true fails) when a lab cannot run here.
func requireLab(t *testing.T) {
	t.Helper()
	loopdev.Require(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("lab test needs /dev/fuse: %v (CI=true: not skipping)", err)
		}
		t.Skipf("lab test needs /dev/fuse: %v", err)
	}
}

// startLab starts a lab with its state and data under the test's temp
// dir, removed at cleanup even when the test fails.
func startLab(t *testing.T, g Geometry, preset string) *Lab {
	t.Helper()
	requireLab(t)
	p, err := LookupPreset(preset)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	l, err := Start(context.Background(), Config{
		Geometry: g, Preset: p, Seed: 1,
		StateRoot: filepath.Join(root, "state"), DataRoot: filepath.Join(root, "data"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	return l
}

// TestLabStoresData writes a pattern through the loop device of every level
// and reads it back, across stripe-unit boundaries and the array's end.
func TestLabStoresData(t *testing.T) {
	for _, g := range []Geometry{
		{Level: Single, Members: 1, Size: 16 << 20},
		{Level: RAID0, Members: 3, StripeUnit: 64 << 10, Size: 16 << 20},
		{Level: RAID1, Members: 2, Size: 16 << 20},
		{Level: RAID5, Members: 4, StripeUnit: 64 << 10, Size: 16 << 20},
		{Level: RAID10, Members: 4, StripeUnit: 64 << 10, Size: 16 << 20},
	} {
		t.Run(string(g.Level), func(t *testing.T) {
			l := startLab(t, g, "fast")
			f := raidlabtest.OpenDirect(t, l.Device)
			rng := rand.New(rand.NewPCG(7, 7))
			type chunk struct {
				off  int64
				data []byte
			}
			var written []chunk
			// Offsets placed across stripe-unit boundaries (31.5 KiB grid)
			// and sizes from one sector to 1 MiB.
			for i, size := range []int{512, 4096, 8192, 65536, 192 << 10, 1 << 20} {
				off := int64(i)*(2<<20) + 32256
				buf := raidlabtest.AlignedBuf(size)
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				if _, err := f.WriteAt(buf, off); err != nil {
					t.Fatalf("write %d at %d: %v", size, off, err)
				}
				written = append(written, chunk{off, bytes.Clone(buf)})
			}
			last := raidlabtest.AlignedBuf(4096)
			copy(last, "the last block")
			if _, err := f.WriteAt(last, g.Size-4096); err != nil {
				t.Fatal(err)
			}
			written = append(written, chunk{g.Size - 4096, bytes.Clone(last)})
			for _, c := range written {
				got := raidlabtest.AlignedBuf(len(c.data))
				if _, err := f.ReadAt(got, c.off); err != nil {
					t.Fatalf("read %d at %d: %v", len(c.data), c.off, err)
				}
				if !bytes.Equal(got, c.data) {
					t.Fatalf("read %d at %d: data differs from what was written", len(c.data), c.off)
				}
			}
			// Unwritten space reads as zeros.
			z := raidlabtest.AlignedBuf(8192)
			if _, err := f.ReadAt(z, 1<<20); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(z, make([]byte, 8192)) {
				t.Fatal("unwritten space does not read as zeros")
			}
			st := l.Array().Stats()
			if st.WriteRequests == 0 || st.ReadRequests == 0 || st.Ops() == 0 {
				t.Fatalf("the array saw no I/O: %+v", st)
			}
			if g.striped() && st.SplitWrites == 0 {
				t.Errorf("writes across stripe-unit boundaries were not counted as split: %+v", st)
			}
			if !g.striped() && st.SplitWrites+st.SplitReads != 0 {
				t.Errorf("a %s array counted split requests: %+v", g.Level, st)
			}
		})
	}
}

// TestLabConcurrent checks that concurrent direct I/O to the loop device
// reaches the array concurrently (CAP_ASYNC_DIO negotiated, the loop
// device in direct-I/O mode): 8 readers against members that each take
// ≥ 2 ms must overlap, and finish in far less than 8× one reader's time.
func TestLabConcurrent(t *testing.T) {
	l := startLab(t, Geometry{Level: RAID0, Members: 8, StripeUnit: 64 << 10, Size: 64 << 20}, "fast")
	if err := l.Array().Apply(Fault{Kind: FaultLatency, Add: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 20
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(l.Device, os.O_RDONLY|unix.O_DIRECT, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			buf := raidlabtest.AlignedBuf(8192)
			for i := range each {
				if _, err := f.ReadAt(buf, int64(w*each+i)*(64<<10)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	st := l.Array().Stats()
	// Serialized, 160 reads take ≥ 160 × 5 ms = 800 ms.
	t.Logf("%d reads by %d workers in %v; most in flight at once: %d", workers*each, workers, elapsed, st.MaxInFlight)
	if st.MaxInFlight < workers/2 {
		t.Fatalf("at most %d requests reached the array at once with %d concurrent readers: the kernel serializes them (no async direct I/O?)", st.MaxInFlight, workers)
	}
}
