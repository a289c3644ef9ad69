package probe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/vocab"
)

// testOptions are small, fast, unpaced options for dir, with the
// free-space floor and busy guard off unless a test turns them on.
func testOptions(dir string, kind Kind) Options {
	o := DefaultOptions()
	o.Dir = dir
	o.Kind = kind
	o.FileSize = 16 << 20
	o.Ops = 300
	o.IOPS = 0
	o.FillRate = 0
	o.MinFreePercent = 0
	o.MinFreeBytes = 0
	o.BusyThreshold = 0
	o.LatencyCeiling = 0
	o.Seed = 42
	return o
}

// snapshot records every entry under dir (name, type, size, content hash),
// so a test can prove a refused run wrote nothing.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		entry := fmt.Sprintf("%s %v %d", rel, info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			entry += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			entry += " -> " + target
		}
		out = append(out, entry)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// checkRun runs every kind on dir and checks counts, the histogram and the
// file contents.
func checkRun(t *testing.T, dir string) {
	for _, tc := range []struct {
		kind Kind
		qd   int
		sync SyncMode
		raw  bool
	}{
		{RandomRead, 1, "", false}, {RandomRead, 4, "", false}, {RandomWrite, 1, "", false}, {RandomWrite, 3, "", false},
		{LogWrite, 1, SyncDsync, false}, {LogWrite, 1, SyncFdatasync, false},
		{RandomRead, 2, "", true}, {RandomWrite, 1, "", true}, {LogWrite, 1, SyncFdatasync, true},
	} {
		t.Run(fmt.Sprintf("%s/qd%d%s/raw=%v", tc.kind, tc.qd, tc.sync, tc.raw), func(t *testing.T) {
			o := testOptions(dir, tc.kind)
			o.QueueDepth = tc.qd
			o.Sync = tc.sync
			o.RawIO = tc.raw
			res, err := Run(t.Context(), o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Ops != o.Ops || res.Errors != 0 || res.StoppedReason != "" || res.Skipped {
				t.Fatalf("Run = ops %d errors %d reason %q skipped %v (first error %q); want %d ops, complete",
					res.Ops, res.Errors, res.StoppedReason, res.Skipped, res.FirstError, o.Ops)
			}
			if res.Bytes != int64(o.Ops)*int64(o.BlockSize) {
				t.Errorf("bytes = %d, want %d", res.Bytes, int64(o.Ops)*int64(o.BlockSize))
			}
			if !res.CacheBypass {
				t.Error("cache_bypass = false on a disk file system")
			}
			if res.Histogram.Count() != uint64(o.Ops) {
				t.Errorf("histogram count = %d, want %d", res.Histogram.Count(), o.Ops)
			}
			var sum uint64
			for _, b := range res.Histogram.Buckets() {
				sum += b.Count
			}
			if sum+res.Histogram.ZeroCount() != uint64(o.Ops) {
				t.Errorf("histogram buckets hold %d, want %d", sum, o.Ops)
			}
			l := res.Latency
			if !(l.Min > 0 && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("latency summary out of order: %+v", l)
			}
			if res.IOPS <= 0 || res.Duration <= 0 {
				t.Errorf("iops %v, duration %v", res.IOPS, res.Duration)
			}
			checkProbeFile(t, filepath.Join(dir, DefaultFileName), o.FileSize)
		})
	}
}

// checkProbeFile proves the file is written in full: every byte allocated,
// a ready header, and no all-zero MiB in the data region.
func checkProbeFile(t *testing.T, path string, size int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 < size {
		t.Errorf("%s: size %d, allocated %d; want %d fully allocated", path, st.Size, st.Blocks*512, size)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHeader(b[:headerBlock])
	if err != nil || h.State != stateReady || h.FileSize != size {
		t.Fatalf("header = %+v, %v; want ready, size %d", h, err, size)
	}
	zero := make([]byte, 1<<20)
	for off := HeaderSize; off < len(b); off += 1 << 20 {
		if bytes.Equal(b[off:off+1<<20], zero) {
			t.Fatalf("%s: MiB at %d is all zeros: the fill did not write it", path, off)
		}
	}
}

func TestRunTempDir(t *testing.T) {
	checkRun(t, t.TempDir())
}

func TestRunLoopExt4(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 128 << 20})
	loopdev.Mkfs(t, d.Path, "ext4")
	checkRun(t, loopdev.Mount(t, d.Path))
}

func TestRunLoopXFS4Kn(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 512 << 20, SectorSize: 4096})
	loopdev.Mkfs(t, d.Path, "xfs")
	dir := loopdev.Mount(t, d.Path)
	checkRun(t, dir)

	// 4Kn: a 512-byte probe cannot be done with O_DIRECT; refused clearly.
	o := testOptions(dir, RandomRead)
	o.BlockSize = 512
	if _, err := Run(t.Context(), o); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "alignment 4096") {
		t.Errorf("512B probe on a 4Kn device: err = %v, want the alignment refusal", err)
	}
}

func TestRunReusesFileAndCleanup(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, RandomRead)
	first, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if first.FillSeconds == 0 {
		t.Error("first run did not report the fill")
	}
	var st1, st2 unix.Stat_t
	unix.Stat(first.File, &st1)
	second, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	unix.Stat(second.File, &st2)
	if second.FillSeconds != 0 || st1.Ino != st2.Ino {
		t.Errorf("second run refilled (fill %vs) or replaced the file (inode %d → %d)", second.FillSeconds, st1.Ino, st2.Ino)
	}
	// A larger --file-size grows and refills the same file.
	o.FileSize = 24 << 20
	third, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if third.FillSeconds == 0 {
		t.Error("growing the file did not refill it")
	}
	checkProbeFile(t, third.File, 24<<20)

	removed, err := Cleanup(dir, "")
	if err != nil || !removed {
		t.Fatalf("Cleanup = %v, %v; want true, nil", removed, err)
	}
	if _, err := os.Lstat(third.File); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("probe file still there after Cleanup: %v", err)
	}
	removed, err = Cleanup(dir, "")
	if err != nil || removed {
		t.Errorf("Cleanup of nothing = %v, %v; want false, nil", removed, err)
	}
}

func TestRunInterruptedDuringFill(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, RandomRead)
	o.FillRate = 4 << 20 // 16 MiB would take 4 s
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := Run(ctx, o)
	if err != nil || res.StoppedReason != vocab.StopInterrupted || res.Ops != 0 {
		t.Fatalf("Run interrupted during fill = %+v, %v; want stopped_reason interrupted", res, err)
	}
	// The half-filled file is ours and gets refilled by the next run.
	o.FillRate = 0
	res, err = Run(t.Context(), o)
	if err != nil || res.Ops != o.Ops || res.FillSeconds == 0 {
		t.Fatalf("run after an interrupted fill = ops %d fill %v, %v", res.Ops, res.FillSeconds, err)
	}
	checkProbeFile(t, res.File, o.FileSize)
}

func TestRunInterruptedDuringMeasure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := testOptions(dir, RandomRead)
	o.IOPS = 200
	o.Ops = 100000
	o.Progress = &Progress{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		// Cancel once probing has done some ops.
		for ctx.Err() == nil {
			if p := o.Progress.Snapshot(); p.Phase == PhaseMeasure && p.Ops >= 5 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != vocab.StopInterrupted || res.Ops == 0 || res.Ops >= o.Ops || res.Histogram.Count() != uint64(res.Ops) {
		t.Errorf("interrupted run: reason %q ops %d hist %d; want a partial result", res.StoppedReason, res.Ops, res.Histogram.Count())
	}
}

func TestRunBudgetCaps(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, RandomRead)
	o.Ops = 50
	res, err := Run(t.Context(), o)
	if err != nil || res.Ops != 50 {
		t.Fatalf("ops cap: %d, %v; want exactly 50", res.Ops, err)
	}
	o.Ops = 1000
	o.IOPS = 100
	o.MaxDuration = 300 * time.Millisecond
	res, err = Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// At 100 IOPS, 300 ms allows at most 31 ops (one at t=0 and one per
	// 10 ms), whatever the disk's speed.
	if res.StoppedReason != vocab.StopMaxDuration || res.Ops > 31 || res.Ops == 0 {
		t.Errorf("duration cap: reason %q, ops %d; want max-duration and 1..31 ops", res.StoppedReason, res.Ops)
	}
}

// Every refusal: a clear error, and nothing written anywhere in the tree.
func TestRunRefusals(t *testing.T) {
	type setup func(t *testing.T, root string) Options
	tests := []struct {
		name  string
		setup setup
		want  error
		msg   string
	}{
		{"symlinked dir", func(t *testing.T, root string) Options {
			real := filepath.Join(root, "real")
			os.Mkdir(real, 0o755)
			os.Symlink(real, filepath.Join(root, "link"))
			return testOptions(filepath.Join(root, "link"), RandomRead)
		}, ErrUnsafePath, "symbolic link"},
		{"symlinked file", func(t *testing.T, root string) Options {
			os.WriteFile(filepath.Join(root, "db.mdf"), []byte("precious database page"), 0o600)
			os.Symlink("db.mdf", filepath.Join(root, DefaultFileName))
			return testOptions(root, RandomWrite)
		}, ErrUnsafePath, "symbolic link"},
		{"dangling symlink", func(t *testing.T, root string) Options {
			os.Symlink("/nonexistent/target", filepath.Join(root, DefaultFileName))
			return testOptions(root, RandomWrite)
		}, ErrUnsafePath, "symbolic link"},
		{"foreign file", func(t *testing.T, root string) Options {
			os.WriteFile(filepath.Join(root, DefaultFileName), bytes.Repeat([]byte("database page "), 1<<16), 0o600)
			return testOptions(root, RandomWrite)
		}, ErrForeignFile, "not created by Plumbline"},
		{"hard link to a foreign file", func(t *testing.T, root string) Options {
			os.WriteFile(filepath.Join(root, "db.mdf"), bytes.Repeat([]byte("x"), 1<<20), 0o600)
			os.Link(filepath.Join(root, "db.mdf"), filepath.Join(root, DefaultFileName))
			return testOptions(root, RandomWrite)
		}, ErrUnsafePath, "hard links"},
		{"directory in its place", func(t *testing.T, root string) Options {
			os.Mkdir(filepath.Join(root, DefaultFileName), 0o755)
			return testOptions(root, RandomRead)
		}, ErrUnsafePath, "not a regular file"},
		{"fifo in its place", func(t *testing.T, root string) Options {
			unix.Mkfifo(filepath.Join(root, DefaultFileName), 0o600)
			return testOptions(root, RandomRead)
		}, ErrUnsafePath, "not a regular file"},
		{"path escape", func(t *testing.T, root string) Options {
			os.Mkdir(filepath.Join(root, "dir"), 0o755)
			o := testOptions(filepath.Join(root, "dir"), RandomWrite)
			o.FileName = "../escaped"
			return o
		}, ErrUnsafePath, "single name inside --dir"},
		{"absolute file name", func(t *testing.T, root string) Options {
			o := testOptions(root, RandomWrite)
			o.FileName = filepath.Join(root, "x")
			return o
		}, ErrUnsafePath, "single name"},
		{"dir is a file", func(t *testing.T, root string) Options {
			os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o600)
			return testOptions(filepath.Join(root, "f"), RandomRead)
		}, ErrUnsafePath, "not a directory"},
		{"free-space floor", func(t *testing.T, root string) Options {
			o := testOptions(root, RandomRead)
			o.MinFreeBytes = 1 << 60
			return o
		}, ErrFreeSpace, "below the floor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			o := tt.setup(t, root)
			before := snapshot(t, root)
			res, err := Run(t.Context(), o)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Run = %+v, %v; want %v mentioning %q", res, err, tt.want, tt.msg)
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("refused run changed the tree (-before +after):\n%s", diff)
			}
			// Cleanup refuses the same things and removes nothing.
			if tt.want != ErrFreeSpace {
				if removed, err := Cleanup(o.Dir, o.FileName); removed || err == nil {
					t.Errorf("Cleanup = %v, %v; want a refusal", removed, err)
				}
				if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
					t.Errorf("refused cleanup changed the tree:\n%s", diff)
				}
			}
		})
	}
}

// A small loop-mounted file system (a log volume): the default floor lets
// a small probe file run (the old fixed 5 GiB floor refused every file on
// any volume under ~5.5 GiB); it refuses a file that would take more than a
// third of the free space, and one that would dip below 10% free with the
// byte floor lowered; nothing is written by a refused run.
func TestRunFreeSpaceFloorLoop(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 64 << 20})
	loopdev.Mkfs(t, d.Path, "ext4")
	dir := loopdev.Mount(t, d.Path)
	before := snapshot(t, dir)
	var sfs unix.Statfs_t
	unix.Statfs(dir, &sfs)
	freeBefore := sfs.Bfree

	o := testOptions(dir, RandomRead)
	def := DefaultOptions()
	o.MinFreePercent, o.MinFreeBytes = def.MinFreePercent, def.MinFreeBytes
	o.FileSize = 24 << 20 // more than a third of the ~58 MiB free
	_, err := Run(t.Context(), o)
	if !errors.Is(err, ErrFreeSpace) || !strings.Contains(err.Error(), "auto: twice the 25165824-byte file") {
		t.Errorf("default floor, 24 MiB file on a 64 MiB fs: err = %v, want ErrFreeSpace naming the auto floor", err)
	}
	o.MinFreeBytes = 0
	o.FileSize = 56 << 20 // leaves less than 10% of 64 MiB
	if _, err := Run(t.Context(), o); !errors.Is(err, ErrFreeSpace) {
		t.Errorf("10%% floor: err = %v, want ErrFreeSpace", err)
	}
	unix.Statfs(dir, &sfs)
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" || sfs.Bfree != freeBefore {
		t.Errorf("refused runs wrote something (free blocks %d → %d):\n%s", freeBefore, sfs.Bfree, diff)
	}
	o.MinFreeBytes = def.MinFreeBytes
	o.FileSize = 8 << 20
	if res, err := Run(t.Context(), o); err != nil || res.Ops != o.Ops {
		t.Errorf("8 MiB with the default floor: %v, ops %d; want it to run", err, res.Ops)
	}
}

func TestFreeSpaceFloor(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	tests := []struct {
		name            string
		total, fileSize int64
		percent         float64
		minBytes        int64
		want            int64
	}{
		{"2GiB log volume, 64MiB file: 10% wins", 2 * GiB, 64 * MiB, 10, MinFreeAuto, 2 * GiB / 10},
		{"2GiB volume, 1GiB file: twice the file", 2 * GiB, 1 * GiB, 10, MinFreeAuto, 2 * GiB},
		{"1TiB volume: 10% wins", 1024 * GiB, 1 * GiB, 10, MinFreeAuto, 1024 * GiB / 10},
		{"explicit bytes", 2 * GiB, 64 * MiB, 0, 100 * MiB, 100 * MiB},
		{"explicit zero", 2 * GiB, 64 * MiB, 0, 0, 0},
		{"huge file saturates", 2 * GiB, 1 << 62, 10, MinFreeAuto, 1<<63 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{FileSize: tt.fileSize, MinFreePercent: tt.percent, MinFreeBytes: tt.minBytes}
			if got := o.FreeSpaceFloor(tt.total); got != tt.want {
				t.Errorf("FreeSpaceFloor(%d) = %d, want %d", tt.total, got, tt.want)
			}
		})
	}
}

func TestRunTmpfs(t *testing.T) {
	loopdev.Require(t)
	dir := t.TempDir()
	loopdev.Run(t, "mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir)
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	before := snapshot(t, dir)
	o := testOptions(dir, RandomRead)
	_, err := Run(t.Context(), o)
	if !errors.Is(err, ErrNoCacheBypass) || !strings.Contains(err.Error(), "--allow-cached") {
		t.Fatalf("tmpfs: err = %v, want ErrNoCacheBypass mentioning --allow-cached", err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("refused tmpfs run wrote something:\n%s", diff)
	}
	o.AllowCached = true
	res, err := Run(t.Context(), o)
	if err != nil || res.CacheBypass || res.Ops != o.Ops {
		t.Fatalf("tmpfs with --allow-cached: cache_bypass %v ops %d, %v; want false, %d", res.CacheBypass, res.Ops, err, o.Ops)
	}
	b, _ := json.Marshal(res)
	if !bytes.Contains(b, []byte(`"cache_bypass":false`)) {
		t.Errorf("JSON does not say cache_bypass false: %s", b)
	}
}

// diskstatsLine is a one-line diskstats fixture for dev with the given
// io_ticks (ms): one 4 KiB read completed per millisecond of them, each
// taking a millisecond (time_in_queue = io_ticks).
func diskstatsLine(dev uint64, ioTicksMs int64) string {
	return fmt.Sprintf("%4d %7d fake0 %d 0 %d 50 100 0 800 50 0 %d %d 0 0 0 0 0 0\n",
		unix.Major(dev), unix.Minor(dev), ioTicksMs, 8*ioTicksMs, ioTicksMs, ioTicksMs)
}

// serveDiskstats makes <procRoot>/diskstats a FIFO that answers each
// reader with dev's line, its io_ticks (ms) taken from ticks when the
// reader opens it: a fixture whose ticks follow the clock exactly, however
// late the test's goroutines are scheduled. It stops at the test's end.
func serveDiskstats(t *testing.T, procRoot string, dev uint64, ticks func() int64) {
	t.Helper()
	path := filepath.Join(procRoot, "diskstats")
	os.Remove(path)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0) // until a reader opens it
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case <-done:
				unix.Close(fd)
				return
			default:
			}
			unix.Write(fd, []byte(diskstatsLine(dev, ticks())))
			unix.Close(fd) // the reader's EOF
			// While a reader has it open, answer again now and then,
			// without holding it open: the reader that just read has its
			// EOF (and ignores a second line), a new one its line.
			for {
				fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				if err == unix.ENXIO {
					break // no reader: wait for the next in open
				}
				if err == nil {
					unix.Write(fd, []byte(diskstatsLine(dev, ticks())))
					unix.Close(fd)
				}
				select {
				case <-done:
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		// A reader of our own lets a writer waiting in open go on.
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		<-exited
		if err == nil {
			unix.Close(fd)
		}
	})
}

// writeDiskstats writes a one-line diskstats fixture for dev with the given
// io_ticks (ms), atomically.
func writeDiskstats(t *testing.T, procRoot string, dev uint64, ioTicksMs int64) {
	line := diskstatsLine(dev, ioTicksMs)
	tmp := filepath.Join(procRoot, ".diskstats.tmp")
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(procRoot, "diskstats")); err != nil {
		t.Error(err)
	}
}

// Busy guard through a fake procfs root: a diskstats fixture whose io_ticks
// advance as fast as the clock (100% busy) makes the run skip; a frozen one
// lets it run.
func TestBusyGuardFixture(t *testing.T) {
	dir := t.TempDir()
	procRoot := t.TempDir()
	var st unix.Stat_t
	unix.Stat(dir, &st)
	writeDiskstats(t, procRoot, st.Dev, 1000)

	o := testOptions(dir, RandomRead)
	o.ProcRoot, o.SysRoot = procRoot, t.TempDir()
	o.BusyThreshold = 70
	o.BusyWindow = 200 * time.Millisecond
	res, err := Run(t.Context(), o)
	if err != nil || res.Skipped || res.Ops != o.Ops || res.BusyGuard != "on" || res.Device != "fake0" {
		t.Fatalf("idle fixture: %+v, %v; want a full run with the guard on fake0", res, err)
	}
	if a := res.BusyIO; a == nil || a.Window < o.BusyWindow || a.IOs != 0 || a.Sectors != 0 || a.IOTicks != 0 {
		t.Errorf("idle fixture: busy I/O %+v; want the window and nothing done in it", a)
	}
	Cleanup(dir, "")

	start := time.Now()
	serveDiskstats(t, procRoot, st.Dev, func() int64 { return 1000 + time.Since(start).Milliseconds() })
	before := snapshot(t, dir)
	res, err = Run(t.Context(), o)
	if err != nil || !res.Skipped || res.StoppedReason != vocab.StopBusy || res.Ops != 0 || res.BusyPercent <= 70 {
		t.Fatalf("busy fixture: skipped %v reason %q ops %d busy %.1f%%, %v; want skipped as busy", res.Skipped, res.StoppedReason, res.Ops, res.BusyPercent, err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("skipped run wrote something:\n%s", diff)
	}
	// What the device did while the guard looked: the server's witness
	// that the device was busy, and with what.
	if a := res.BusyIO; a == nil || a.IOs == 0 || a.Sectors != 8*a.IOs || a.TimeInQueue != time.Duration(a.IOs)*time.Millisecond ||
		a.IOTicks <= 0 || a.IOTicks > a.Window {
		t.Errorf("busy fixture: busy I/O %+v; want reads of 8 sectors, a millisecond each, io_ticks within the window", a)
	}
}

func TestBusyGuardUnavailable(t *testing.T) {
	dir := t.TempDir()
	procRoot := t.TempDir()
	os.WriteFile(filepath.Join(procRoot, "diskstats"), []byte("   8       0 sda 1 0 8 1 1 0 8 1 0 1 1\n"), 0o644)
	o := testOptions(dir, RandomRead)
	o.ProcRoot, o.SysRoot = procRoot, t.TempDir()
	o.BusyThreshold = 70
	res, err := Run(t.Context(), o)
	if err != nil || res.Ops != o.Ops || !strings.HasPrefix(res.BusyGuard, "unavailable") {
		t.Errorf("no diskstats line: busy guard %q, ops %d, %v; want unavailable and a full run", res.BusyGuard, res.Ops, err)
	}
}

// Busy guard against real load: the test drives O_DIRECT reads on a
// loop-mounted file system at QD16; the probe on the same device skips.
func TestBusyGuardRealLoad(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 128 << 20})
	// Direct I/O to the backing file: the loop device's requests then wait
	// for the real disk, not the page cache, so the load keeps it busy even
	// on a slow, shared CPU.
	loopdev.Run(t, "losetup", "--direct-io=on", d.Path)
	loopdev.Mkfs(t, d.Path, "ext4")
	mnt := loopdev.Mount(t, d.Path)
	// Make the load file with the probe engine itself, in a sibling dir.
	loadDir := filepath.Join(mnt, "load")
	probeDir := filepath.Join(mnt, "probe")
	os.Mkdir(loadDir, 0o755)
	os.Mkdir(probeDir, 0o755)
	lo := testOptions(loadDir, RandomRead)
	lo.FileSize = 32 << 20
	lo.Ops = 1
	if _, err := Run(t.Context(), lo); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	load := make([]*Progress, 16)
	for w := range load {
		load[w] = &Progress{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := lo
			o.Ops = MaxOps
			o.MaxDuration = time.Hour
			o.Seed = uint64(w + 1)
			o.Progress = load[w]
			Run(ctx, o) // ends with stopped_reason interrupted
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	// The load has started: every reader is past its first reads.
	deadline := time.Now().Add(time.Minute)
	for w := 0; w < len(load); {
		if p := load[w].Snapshot(); p.Phase == PhaseMeasure && p.Ops >= 2 {
			w++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("load reader %d did not start within a minute", w)
		}
		time.Sleep(time.Millisecond)
	}

	o := testOptions(probeDir, RandomRead)
	// The load is CPU-bound on a slow shared machine (or under -race), so
	// it may not reach the default 70%; any clear load must trip 30%.
	o.BusyThreshold = 30
	o.BusyWindow = 500 * time.Millisecond
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || res.StoppedReason != vocab.StopBusy || res.Device != d.Name {
		t.Errorf("probe beside QD16 load on %s: skipped %v reason %q device %q busy %.1f%%; want skipped as busy",
			d.Name, res.Skipped, res.StoppedReason, res.Device, res.BusyPercent)
	}
	if _, err := os.Lstat(filepath.Join(probeDir, DefaultFileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a skipped run created the probe file: %v", err)
	}
}

func TestResultJSON(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(t.Context(), testOptions(dir, RandomRead))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"kind", "file", "block_size_bytes", "queue_depth", "ops", "errors", "duration_seconds", "iops",
		"throughput_bytes_per_second", "cache_bypass", "stopped_reason", "latency_seconds", "latency_histogram"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	lat := m["latency_seconds"].(map[string]any)
	for _, k := range []string{"min", "mean", "p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_seconds lacks %q", k)
		}
	}
}

func BenchmarkRunSaturatedRead(b *testing.B) {
	dir := b.TempDir()
	o := testOptions(dir, RandomRead)
	o.Ops = 1
	if _, err := Run(b.Context(), o); err != nil {
		b.Fatal(err)
	}
	o.Ops = b.N
	b.ResetTimer()
	res, err := Run(b.Context(), o)
	if err != nil || res.Ops != b.N {
		b.Fatalf("%v ops %d", err, res.Ops)
	}
	b.ReportMetric(res.IOPS, "iops")
}

// Busy guard during a run, through the fixture: idle while the probe file
// is prepared, 100% busy once the probe has started; the run stops early.
func TestBusyGuardStopsDuringRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	procRoot := t.TempDir()
	var st unix.Stat_t
	unix.Stat(dir, &st)
	writeDiskstats(t, procRoot, st.Dev, 1000)
	o := testOptions(dir, RandomRead)
	o.ProcRoot, o.SysRoot = procRoot, t.TempDir()
	o.BusyThreshold = 70
	o.BusyWindow = 50 * time.Millisecond
	o.BusyInterval = 50 * time.Millisecond
	o.IOPS = 200
	o.Ops = 100000
	o.MaxDuration = time.Minute
	if _, err := Run(t.Context(), func() Options { p := o; p.Ops = 1; p.BusyThreshold = 0; return p }()); err != nil {
		t.Fatal(err) // create the file while the fixture is idle
	}

	// Idle through the pre-run window, 100% busy from the probe's start.
	o.Progress = &Progress{}
	serveDiskstats(t, procRoot, st.Dev, func() int64 {
		if p := o.Progress.Snapshot(); p.Phase == PhaseMeasure {
			return 1000 + time.Since(p.PhaseStarted).Milliseconds()
		}
		return 1000
	})
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != vocab.StopBusyDuring || res.Skipped || res.Ops == 0 || res.Ops >= o.Ops || res.Histogram.Count() != uint64(res.Ops) {
		t.Errorf("busy during the run: reason %q skipped %v ops %d busy %.1f%%; want busy-during with a partial result",
			res.StoppedReason, res.Skipped, res.Ops, res.BusyPercent)
	}
}

// TestRunReportsRewrite: a probe file whose size changed is written again
// in full, and the result says from which size; an unchanged one is not.
// Progress follows the fill and the ops.
func TestRunReportsRewrite(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, RandomRead)
	o.FileSize, o.Ops = 8<<20, 20
	if res, err := Run(t.Context(), o); err != nil || res.FileRewrittenFrom != 0 || res.FillSeconds == 0 {
		t.Fatalf("new file: %+v, %v; want a fill and no rewrite", res, err)
	}
	if res, err := Run(t.Context(), o); err != nil || res.FileRewrittenFrom != 0 || res.FillSeconds != 0 {
		t.Fatalf("same size: rewritten from %d, fill %v s, %v; want neither", res.FileRewrittenFrom, res.FillSeconds, err)
	}
	o.FileSize = 4 << 20
	o.Progress = &Progress{}
	res, err := Run(t.Context(), o)
	if err != nil || res.FileRewrittenFrom != 8<<20 || res.FillSeconds == 0 {
		t.Fatalf("changed size: rewritten from %d, fill %v s, %v; want 8MiB and a fill", res.FileRewrittenFrom, res.FillSeconds, err)
	}
	want := ProgressSnapshot{Phase: PhaseMeasure, FillDone: 3 << 20, FillTotal: 3 << 20, RewriteFrom: 8 << 20, Ops: 20, OpsBudget: 20}
	got := o.Progress.Snapshot()
	got.PhaseStarted = time.Time{}
	if got != want {
		t.Errorf("progress = %+v, want %+v", got, want)
	}
}
