// Package loopdev builds real block-device stacks for tests: loop devices
// with partition tables, file systems and mounts, each torn down by
// t.Cleanup even when the test fails. It shells out to losetup, parted,
// partx, mkfs.* and mount, so only tests import it — never the agent.
//
// Tests that need it call Require first: without root or the tools the test
// is skipped, except under CI=true, where it fails instead.
package loopdev

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Require skips the test when loop devices cannot be used here (not root,
// a tool missing), or fails it when CI=true, where nothing may skip.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range append([]string{"losetup", "parted", "partx", "mount", "umount"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		missing = append(missing, "/dev/loop-control")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("real-device test needs %s", strings.Join(missing, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping; run scripts/test.sh as root to install them)", msg)
	}
	t.Skip(msg)
}

// Run runs a command and fails the test with its output when it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(bytes.TrimSpace(out))
}

// Device is an attached loop device.
type Device struct {
	Path string // /dev/loopN
	Name string // loopN
}

// Options shape a new loop device.
type Options struct {
	SizeBytes  int64 // backing file size; default 256 MiB
	SectorSize int   // logical sector size (losetup -b); default 512
}

// New creates a sparse backing file in the test's temp dir and attaches it.
func New(t testing.TB, o Options) Device {
	t.Helper()
	if o.SizeBytes == 0 {
		o.SizeBytes = 256 << 20
	}
	backing := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(backing)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(o.SizeBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	args := []string{"--find", "--show"}
	if o.SectorSize != 0 {
		args = append(args, "--sector-size", fmt.Sprint(o.SectorSize))
	}
	path := Run(t, "losetup", append(args, backing)...)
	t.Cleanup(func() { detach(t, path) })
	return Device{Path: path, Name: filepath.Base(path)}
}

func detach(t testing.TB, path string) {
	// A just-unmounted device can be briefly busy; retry for a moment.
	var out []byte
	var err error
	for range 20 {
		exec.Command("partx", "-d", path).Run()
		if out, err = exec.Command("losetup", "-d", path).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("losetup -d %s: %v: %s", path, err, out)
}

// Partition writes a partition table of the given label (msdos or gpt) with
// one partition starting at startSector (in the device's logical sectors)
// and spanning sizeSectors (0: to the end), registers it with partx and
// returns its device path (e.g. /dev/loop3p1).
func Partition(t testing.TB, d Device, label string, startSector, sizeSectors int64) string {
	t.Helper()
	Run(t, "parted", "-s", d.Path, "mklabel", label)
	var end string
	if sizeSectors > 0 {
		end = fmt.Sprintf("%ds", startSector+sizeSectors-1)
	} else {
		// The last usable sector; GPT keeps its backup table in the last 33.
		end = "-1s"
		if label == "gpt" {
			end = "-34s"
		}
	}
	// "--" lets parted read a negative end ("-1s": the last sector).
	Run(t, "parted", "-s", d.Path, "--", "unit", "s", "mkpart", "primary", fmt.Sprintf("%ds", startSector), end)
	exec.Command("partx", "-d", d.Path).Run()
	Run(t, "partx", "-a", d.Path)
	part := d.Path + "p1"
	for range 50 {
		if _, err := os.Stat(part); err == nil {
			return part
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("partition %s did not appear after partx -a", part)
	return ""
}

// Mkfs makes a file system of the given type with extra mkfs arguments.
func Mkfs(t testing.TB, dev, fstype string, args ...string) {
	t.Helper()
	var full []string
	switch fstype {
	case "ext4", "ext3", "ext2":
		full = append([]string{"-q", "-F"}, args...)
	case "xfs":
		full = append([]string{"-q", "-f"}, args...)
		if !slices.Contains(args, "-l") {
			// Recent xfsprogs refuse logs under 64 MiB; small test
			// devices would otherwise get one.
			full = append(full, "-l", "size=64m")
		}
	default:
		full = args
	}
	Run(t, "mkfs."+fstype, append(full, dev)...)
}

// Mount mounts dev on a fresh directory under the test's temp dir and
// unmounts it at cleanup.
func Mount(t testing.TB, dev string, options ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{dev, dir}
	if len(options) > 0 {
		args = append([]string{"-o", strings.Join(options, ",")}, args...)
	}
	Run(t, "mount", args...)
	t.Cleanup(func() {
		var out []byte
		var err error
		for range 20 {
			if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("umount %s: %v: %s", dir, err, out)
	})
	return dir
}
