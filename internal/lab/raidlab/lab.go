//go:build linux

package raidlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// DefaultStateRoot is where each lab keeps its state directory
// (<root>/<id>/state.json, the FUSE mount point, the control socket).
const DefaultStateRoot = "/run/plumbline-raidlab"

// DefaultDataRoot is where each lab keeps its sparse backing file. It is
// not under /run, which is often a RAM-backed tmpfs.
const DefaultDataRoot = "/var/tmp/plumbline-raidlab"

// Config describes a lab to start.
type Config struct {
	Geometry
	Preset    Preset
	Seed      uint64 // rotational-delay sequence; 0 picks one from the clock
	StateRoot string // default DefaultStateRoot
	DataRoot  string // default DefaultDataRoot
	ID        string // default: random; its state directory may already exist (empty, or holding only a log)
	Daemon    bool   // the owning process is a `raidlab serve` daemon, which `raidlab down` may signal
	// MemberDevices gives every member a block device of its own (a loop
	// device over its file on the FUSE mount) that the array's member
	// operations really go through, and writes the array's md sysfs tree
	// (State.Sysfs). See members.go.
	MemberDevices bool
	// TreeRoot is where the sysfs tree (TreeRoot/sys) and the device
	// directory with its by-id links (TreeRoot/dev) go; labs may share one,
	// each writing its own devices. Default: the lab's state directory.
	TreeRoot string
}

// State is what a lab records about itself in <state root>/<id>/state.json,
// so that the command line can find it by device and a reaper can remove
// it when its owning process is gone.
type State struct {
	ID         string   `json:"id"`
	PID        int      `json:"pid"`
	PIDStart   uint64   `json:"pid_start"` // the owner's start time (clock ticks since boot), against PID reuse
	Device     string   `json:"device,omitempty"`
	Mountpoint string   `json:"mountpoint"`
	Control    string   `json:"control"`
	DataFile   string   `json:"data_file"`
	Geometry   Geometry `json:"geometry"`
	Preset     string   `json:"preset"`
	Started    string   `json:"started"`
	Daemon     bool     `json:"daemon"` // owned by a `raidlab serve` process (SIGTERM stops it cleanly)
	// Members are the members' loop devices, in member order (a lab with
	// MemberDevices); Sysfs is the sysfs tree the lab writes for them and
	// the array (sysfs.go).
	Members []string `json:"members,omitempty"`
	Sysfs   string   `json:"sysfs,omitempty"`
	DevRoot string   `json:"dev_root,omitempty"` // disk/by-id links to the members, links to the devices
}

// Lab is a running emulated array: FUSE mount, loop device, control socket.
type Lab struct {
	State
	dir  string
	arr  *Array
	data *os.File
	devs []*os.File // the member devices, open with O_DIRECT
	tree string     // Config.TreeRoot
	srv  *fuse.Server
	ln   net.Listener
	http *http.Server

	closeOnce sync.Once
	closeErr  error
}

// Array returns the emulated array, for in-process fault injection and
// counters.
func (l *Lab) Array() *Array { return l.arr }

// Start reaps leftovers of dead labs, then builds a new one: sparse
// backing file, array, FUSE mount with direct I/O, loop device with
// --direct-io=on, control socket. Close undoes all of it; a lab whose
// process dies without Close is reaped by the next Start (or `raidlab
// list`). Needs root.
func Start(ctx context.Context, cfg Config) (_ *Lab, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	Reap(cfg.StateRoot)
	if cfg.ID == "" {
		var b [6]byte
		rand.Read(b[:])
		cfg.ID = hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(cfg.ID, "/.") || cfg.ID == "" {
		return nil, fmt.Errorf("raidlab: bad lab id %q", cfg.ID)
	}
	l, err := newLab(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if cerr := l.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	if err := l.serveArray(ctx, cfg); err != nil {
		return nil, err
	}
	if err := l.writeState(); err != nil {
		return nil, err
	}
	if err := l.serveControl(); err != nil {
		return nil, err
	}
	return l, nil
}

// withDefaults checks cfg and fills in the roots and the seed.
func (cfg Config) withDefaults() (Config, error) {
	if err := cfg.Geometry.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Preset.Name == "" {
		return cfg, errors.New("raidlab: no preset")
	}
	if cfg.StateRoot == "" {
		cfg.StateRoot = DefaultStateRoot
	}
	if cfg.DataRoot == "" {
		cfg.DataRoot = DefaultDataRoot
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	return cfg, nil
}

// newLab makes the lab's state directory and writes its state file first:
// from then on a crash leaves something the reaper can find.
func newLab(cfg Config) (*Lab, error) {
	dir := filepath.Join(cfg.StateRoot, cfg.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raidlab: state dir: %w", err)
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return nil, err
	}
	l := &Lab{dir: dir, tree: cfg.TreeRoot, State: State{
		ID: cfg.ID, PID: os.Getpid(), PIDStart: start,
		Mountpoint: filepath.Join(dir, "mnt"),
		Control:    filepath.Join(dir, "control.sock"),
		DataFile:   filepath.Join(cfg.DataRoot, cfg.ID, "array.img"),
		Geometry:   cfg.Geometry, Preset: cfg.Preset.Name,
		Started: time.Now().UTC().Format(time.RFC3339), Daemon: cfg.Daemon,
	}}
	if err := l.writeState(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return l, nil
}

// serveArray creates the sparse backing file and the array on it, mounts
// it over FUSE and attaches the loop device (l.Device).
func (l *Lab) serveArray(ctx context.Context, cfg Config) (err error) {
	if err := os.MkdirAll(l.Mountpoint, 0o700); err != nil {
		return fmt.Errorf("raidlab: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(l.DataFile), 0o700); err != nil {
		return fmt.Errorf("raidlab: data dir: %w", err)
	}
	l.data, err = os.OpenFile(l.DataFile, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("raidlab: backing file: %w", err)
	}
	if err := l.data.Truncate(cfg.Size); err != nil {
		return fmt.Errorf("raidlab: backing file: %w", err)
	}
	if l.arr, err = NewArray(cfg.Geometry, cfg.Preset, l.data, cfg.Seed); err != nil {
		return err
	}
	if l.srv, err = mountArray(l.Mountpoint, "raidlab-"+cfg.ID, l.arr, cfg.MemberDevices); err != nil {
		return err
	}
	if cfg.MemberDevices {
		if err := l.attachMembers(ctx); err != nil {
			return err
		}
	}
	if l.Device, err = attachLoop(ctx, filepath.Join(l.Mountpoint, ArrayFile)); err != nil {
		return err
	}
	if cfg.MemberDevices {
		return l.WriteSysfs()
	}
	return nil
}

func (l *Lab) writeState() error {
	b, err := json.MarshalIndent(l.State, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, "state.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("raidlab: state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, "state.json")); err != nil {
		return fmt.Errorf("raidlab: state: %w", err)
	}
	return nil
}

// Close removes the lab: file systems mounted on the device or its
// partitions, the partitions, the loop device, the control socket, the FUSE
// mount, the backing file and the state directory. It is safe to call more
// than once.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		l.removeTree()
		if l.Device != "" {
			errs = append(errs, teardownDevice(l.Device, filepath.Join(l.Mountpoint, ArrayFile)))
		}
		errs = append(errs, l.detachMembers())
		if l.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			l.http.Shutdown(ctx)
			cancel()
		}
		if l.srv != nil {
			var err error
			for range 50 {
				if err = l.srv.Unmount(); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				// Leave nothing mounted: a lazy unmount lets the kernel finish it.
				if lerr := exec.Command("umount", "-l", l.Mountpoint).Run(); lerr != nil {
					errs = append(errs, fmt.Errorf("raidlab: unmount FUSE %s: %w", l.Mountpoint, err))
				}
			}
		}
		if l.data != nil {
			l.data.Close()
		}
		if l.DataFile != "" {
			os.RemoveAll(filepath.Dir(l.DataFile))
		}
		if isMountpoint(l.Mountpoint) {
			errs = append(errs, fmt.Errorf("raidlab: %s is still mounted; state dir %s kept for the reaper", l.Mountpoint, l.dir))
		} else if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, fmt.Errorf("raidlab: state dir: %w", err))
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// attachLoop attaches file to a free loop device with direct I/O and
// checks that the kernel really uses direct I/O on it.
func attachLoop(ctx context.Context, file string) (string, error) {
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", "--direct-io=on", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("raidlab: losetup --direct-io=on %s: %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop/dio"))
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		exec.Command("losetup", "-d", dev).Run()
		return "", fmt.Errorf("raidlab: %s is not using direct I/O (loop/dio = %q, %v)", dev, strings.TrimSpace(string(b)), err)
	}
	return dev, nil
}

// backingFile is the file a loop device is attached to, or "" if it is
// not attached.
func backingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop/backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// teardownDevice unmounts every file system mounted from dev or its
// partitions, drops the partitions and detaches dev — but only while dev is
// still attached to want (a loop number can be reused by someone else).
func teardownDevice(dev, want string) error {
	if got := backingFile(dev); got != want {
		return nil // already detached, or no longer ours
	}
	var errs []error
	for _, mp := range mountsOf(dev) {
		if err := umount(mp); err != nil {
			errs = append(errs, err)
		}
	}
	exec.Command("partx", "-d", dev).Run()
	var out []byte
	var err error
	for range 50 {
		if backingFile(dev) != want {
			return errors.Join(errs...)
		}
		if out, err = exec.Command("losetup", "-d", dev).CombinedOutput(); err == nil {
			// losetup -d on a busy device only marks it for autoclear;
			// wait for it to be really gone.
			for range 50 {
				if backingFile(dev) != want {
					return errors.Join(errs...)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(append(errs, fmt.Errorf("raidlab: losetup -d %s: still attached: %v %s", dev, err, strings.TrimSpace(string(out))))...)
}

// umount unmounts mp, retrying for a few seconds while it is busy.
func umount(mp string) error {
	var out []byte
	var err error
	for range 30 {
		if out, err = exec.Command("umount", mp).CombinedOutput(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("raidlab: umount %s: %w: %s", mp, err, strings.TrimSpace(string(out)))
}

// mountsOf lists the mount points of file systems whose source is dev or
// one of its partitions, deepest first.
func mountsOf(dev string) []string {
	devs := map[string]bool{}
	name := filepath.Base(dev)
	if b, err := os.ReadFile(filepath.Join("/sys/block", name, "dev")); err == nil {
		devs[strings.TrimSpace(string(b))] = true
	}
	parts, _ := filepath.Glob(filepath.Join("/sys/block", name, name+"p*", "dev"))
	for _, p := range parts {
		if b, err := os.ReadFile(p); err == nil {
			devs[strings.TrimSpace(string(b))] = true
		}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !devs[f[2]] {
			continue
		}
		mps = append(mps, unescapeMount(f[4]))
	}
	// Unmount nested mounts before their parents.
	for i, j := 0, len(mps)-1; i < j; i, j = i+1, j-1 {
		mps[i], mps[j] = mps[j], mps[i]
	}
	return mps
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// procStart is a process's start time in clock ticks since boot
// (/proc/PID/stat field 22), which tells a live owner from a reused PID.
func procStart(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

// procStat reads a process's start time and state letter (Z: zombie).
func procStat(pid int) (uint64, byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("raidlab: /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("raidlab: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], err
}

// Alive says whether the process that owns the lab still runs.
// A zombie is not alive: it has exited, though a thread stuck in I/O
// on its own FUSE mount can keep it from being fully gone.
func (s State) Alive() bool {
	start, state, err := procStat(s.PID)
	return err == nil && start == s.PIDStart && state != 'Z'
}

// List reads the state of every lab under root.
func List(root string) ([]State, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []State
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		s, err := readState(filepath.Join(root, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

func readState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("raidlab: %s/state.json: %w", dir, err)
	}
	return s, nil
}

// orphanAge is how old a state directory without a state file must be
// before the reaper removes it (a starting lab creates the directory, then
// writes the file at once).
const orphanAge = 10 * time.Minute

// Reap removes the leftovers of every lab under root whose owning process
// is gone: file systems on its device, its partitions and loop device, its
// FUSE mount, backing file and state directory. Labs whose owner still
// runs — other tests on this machine — are never touched. It returns the
// ids it reaped.
func Reap(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var reaped []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		s, err := readState(dir)
		if err != nil {
			if info, serr := os.Stat(dir); serr == nil && time.Since(info.ModTime()) > orphanAge && errors.Is(err, os.ErrNotExist) {
				if !isMountpoint(filepath.Join(dir, "mnt")) {
					os.RemoveAll(dir)
				}
			}
			continue
		}
		if s.Alive() {
			continue
		}
		if err := reapState(dir, s); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped = append(reaped, s.ID)
	}
	return reaped, errors.Join(errs...)
}

func reapState(dir string, s State) error {
	var errs []error
	// A dead owner's FUSE connection may still hold requests (its own
	// threads stuck on them); aborting it fails them, so that the loop
	// device and the mount can go.
	abortFUSE(s.Mountpoint)
	if s.Device != "" {
		if err := teardownDevice(s.Device, filepath.Join(s.Mountpoint, ArrayFile)); err != nil {
			errs = append(errs, err)
		}
	}
	for m, dev := range s.Members {
		if err := teardownDevice(dev, filepath.Join(s.Mountpoint, MemberFile(m))); err != nil {
			errs = append(errs, err)
		}
	}
	if isMountpoint(s.Mountpoint) {
		// The server is dead: the connection is gone and a plain
		// unmount works; -l covers a straggling opener.
		if out, err := exec.Command("umount", "-l", s.Mountpoint).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("raidlab: reap %s: umount %s: %w: %s", s.ID, s.Mountpoint, err, out))
		}
	}
	if len(errs) > 0 || isMountpoint(s.Mountpoint) {
		return errors.Join(append(errs, fmt.Errorf("raidlab: reap %s: %s still mounted", s.ID, s.Mountpoint))...)
	}
	if s.DataFile != "" && filepath.Base(s.DataFile) == "array.img" {
		os.RemoveAll(filepath.Dir(s.DataFile))
	}
	return os.RemoveAll(dir)
}

// abortFUSE aborts the FUSE connection mounted at dir, through the fusectl
// file system (mounted at /sys/fs/fuse/connections if it is not yet).
func abortFUSE(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMount(f[4]) != dir {
			continue
		}
		_, minor, ok := strings.Cut(f[2], ":")
		if !ok {
			return
		}
		const ctl = "/sys/fs/fuse/connections"
		if _, err := os.Stat(filepath.Join(ctl, minor)); err != nil {
			exec.Command("mount", "-t", "fusectl", "fusectl", ctl).Run()
		}
		os.WriteFile(filepath.Join(ctl, minor, "abort"), []byte("1"), 0)
		return
	}
}

// isMountpoint says whether dir is a mount point (in this mount namespace).
func isMountpoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && unescapeMount(f[4]) == dir {
			return true
		}
	}
	return false
}
