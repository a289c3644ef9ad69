package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
	"github.com/plumbline/plumbline/internal/lab/raidlab/raidlabtest"
)

// The test binary doubles as the raidlab command (and so as its own
// daemon, which up starts from os.Executable) when this is set.
const asCommand = "PLUMBLINE_RAIDLAB_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) == "1" {
		main()
	}
	os.Exit(m.Run())
}

type cli struct {
	t    *testing.T
	root string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	loopdev.Require(t, "mkfs.ext4")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs /dev/fuse: %v (CI=true: not skipping)", err)
		}
		t.Skipf("needs /dev/fuse: %v", err)
	}
	return &cli{t: t, root: filepath.Join(t.TempDir(), "state")}
}

// run runs the command and returns stdout, stderr and its exit status.
func (c *cli) run(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCommand+"=1", "PLUMBLINE_RAIDLAB_ROOT="+c.root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (c *cli) must(args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("raidlab %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

var loopPath = regexp.MustCompile(`^/dev/loop[0-9]+$`)

// up starts a lab and registers its removal, even if the test fails.
func (c *cli) up(args ...string) string {
	c.t.Helper()
	out := c.must(append([]string{"up"}, args...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	dev := lines[len(lines)-1]
	if !loopPath.MatchString(dev) {
		c.t.Fatalf("up: last line %q is not a loop device path alone", dev)
	}
	c.t.Cleanup(func() {
		if _, err := raidlab.Find(c.root, dev); err == nil {
			c.run("down", dev)
		}
	})
	return dev
}

// TestUpFaultStatsDown drives a RAID 10 lab through the command: up, a file
// system on a partition at 31.5 KiB, faults, stats, down with the file
// system still mounted.
func TestUpFaultStatsDown(t *testing.T) {
	c := newCLI(t)
	dev := c.up("--level", "raid10", "--disks", "4", "--stripe-unit", "64KiB", "--size", "256MiB", "--preset", "fast")

	if out := c.must("list"); !strings.Contains(out, dev) || !strings.Contains(out, "raid10") {
		t.Fatalf("list does not show %s:\n%s", dev, out)
	}
	// A real partition at the seeds' 63 sectors and a real file system.
	loopdev.Run(t, "parted", "-s", dev, "mklabel", "msdos")
	loopdev.Run(t, "parted", "-s", dev, "unit", "s", "mkpart", "primary", "63s", "100%")
	exec.Command("partx", "-a", dev).Run() // parted may have added it already
	part := dev + "p1"
	loopdev.Mkfs(t, part, "ext4")
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	loopdev.Run(t, "mount", part, mnt)
	want := bytes.Repeat([]byte("plumbline raidlab "), 100000)
	if err := os.WriteFile(filepath.Join(mnt, "f"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "sync")
	loopdev.Run(t, "sh", "-c", "echo 3 > /proc/sys/vm/drop_caches")
	got, err := os.ReadFile(filepath.Join(mnt, "f"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file read back through ext4 on the lab differs (err %v)", err)
	}

	c.must("fault", dev, "slow", "--member", "2", "--factor", "3")
	c.must("fault", dev, "latency", "--add", "5ms")
	c.must("fault", dev, "fail", "--member", "1")
	c.must("fault", dev, "throttle", "--iops", "500", "--burst", "50")
	c.must("fault", dev, "stall", "--member", "3", "--fraction", "0.03", "--latency", "100ms")
	c.must("fault", dev, "rebuild", "--member", "0", "--load", "0.2")
	stats := c.must("stats", dev)
	for _, w := range []string{"slow ×3", "failed", "added latency 5ms", "throttle: 500 IOPS, burst 50", "stalls 3% for 100ms", "rebuild: written every", "rebuild: read every"} {
		if !strings.Contains(stats, w) {
			t.Errorf("stats after faults lack %q:\n%s", w, stats)
		}
	}
	// Degraded RAID 10 still serves: member 1's mirror (0) answers.
	f := raidlabtest.OpenDirect(t, dev)
	buf := raidlabtest.AlignedBuf(8192)
	start := time.Now()
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatalf("read from degraded raid10: %v", err)
	}
	if d := time.Since(start); d < 5*time.Millisecond {
		t.Errorf("read took %v with 5 ms of added latency", d)
	}
	c.must("fault", dev, "restore")
	if stats := c.must("stats", dev); strings.Contains(stats, "failed\n") || strings.Contains(stats, "slow") || strings.Contains(stats, "stalls") || strings.Contains(stats, "rebuild") || strings.Contains(stats, "throttle: 500") {
		t.Errorf("restore left faults:\n%s", stats)
	}
	if _, errs, code := c.run("fault", dev, "slow", "--member", "9", "--factor", "2"); code == 0 || !strings.Contains(errs, "out of range") {
		t.Errorf("fault on member 9 of 4: exit %d, %q", code, errs)
	}
	if _, errs, code := c.run("fault", dev, "stall", "--member", "1", "--fraction", "0.03"); code == 0 || !strings.Contains(errs, "--latency") {
		t.Errorf("fault stall without --latency: exit %d, %q", code, errs)
	}
	f.Close()

	s, err := raidlab.Find(c.root, dev)
	if err != nil {
		t.Fatal(err)
	}
	c.must("down", dev) // ext4 still mounted: down unmounts it
	if isMounted(mnt) || isMounted(s.Mountpoint) {
		t.Fatalf("down left %s or %s mounted", mnt, s.Mountpoint)
	}
	if b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/backing_file"); err == nil && strings.Contains(string(b), s.ID) {
		t.Fatalf("down left %s attached to %s", dev, b)
	}
	if _, err := os.Stat(filepath.Join(c.root, s.ID)); !os.IsNotExist(err) {
		t.Fatalf("down left the state dir: %v", err)
	}
	if _, err := os.Stat(s.DataFile); !os.IsNotExist(err) {
		t.Fatalf("down left the backing file: %v", err)
	}
	if s.Alive() { // exited (a zombie until its new parent reaps it) or gone
		t.Fatalf("daemon %d still runs after down", s.PID)
	}
}

// TestRAID0FailedMemberIsEIO: a RAID 0 with a failed member answers I/O
// errors on the failed member's chunks and serves the others.
func TestRAID0FailedMemberIsEIO(t *testing.T) {
	c := newCLI(t)
	dev := c.up("--level", "raid0", "--disks", "2", "--stripe-unit", "64KiB", "--size", "64MiB")
	c.must("fault", dev, "fail", "--member", "1")
	f := raidlabtest.OpenDirect(t, dev)
	buf := raidlabtest.AlignedBuf(8192)
	if _, err := f.ReadAt(buf, 0); err != nil { // chunk 0: member 0
		t.Fatalf("read of a surviving member's chunk: %v", err)
	}
	if _, err := f.ReadAt(buf, 64<<10); err == nil { // chunk 1: member 1
		t.Fatal("read of a failed RAID 0 member's chunk succeeded")
	}
}

// TestReapKilledDaemon: a daemon killed with SIGKILL leaves its loop device
// and FUSE mount; the reaper removes them, and never a live lab's.
func TestReapKilledDaemon(t *testing.T) {
	c := newCLI(t)
	live := c.up("--level", "raid1", "--disks", "2", "--size", "64MiB")
	dead := c.up("--level", "raid1", "--disks", "2", "--size", "64MiB")
	ds, err := raidlab.Find(c.root, dead)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(ds.PID, syscall.SIGKILL)
	for i := 0; i < 100 && ds.Alive(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if !isMounted(ds.Mountpoint) {
		t.Fatal("a SIGKILLed daemon left nothing to reap: the test proves nothing")
	}
	out := c.must("list")
	if !strings.Contains(out, "dead") {
		t.Fatalf("list does not show the dead lab:\n%s", out)
	}
	out = c.must("reap")
	if !strings.Contains(out, "reaped "+ds.ID) {
		t.Fatalf("reap did not reap %s:\n%s", ds.ID, out)
	}
	if isMounted(ds.Mountpoint) {
		t.Fatal("reap left the FUSE mount")
	}
	if b, err := os.ReadFile("/sys/block/" + filepath.Base(dead) + "/loop/backing_file"); err == nil && strings.Contains(string(b), ds.ID) {
		t.Fatalf("reap left %s attached", dead)
	}
	// The live one is untouched and still serves.
	f := raidlabtest.OpenDirect(t, live)
	if _, err := f.ReadAt(raidlabtest.AlignedBuf(4096), 0); err != nil {
		t.Fatalf("the live lab stopped serving after reap: %v", err)
	}
	if _, err := raidlab.Find(c.root, live); err != nil {
		t.Fatalf("reap removed the live lab: %v", err)
	}
}

func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[4] == dir {
			return true
		}
	}
	return false
}
