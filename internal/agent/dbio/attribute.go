package dbio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Mounts is what the agent's last geometry discovery found: the volumes,
// and the mounts that are not volumes with why.
type Mounts struct {
	Volumes  []*plumblinev1.Volume
	Filtered []geometry.Filtered
}

// Place is where a location's files are: the volume holding them, or why
// the agent cannot say.
type Place struct {
	MountPoint string
	Device     string
	Why        string // non-empty exactly when MountPoint is empty
}

// Resolver turns a path into the path with every symlink followed
// (filepath.EvalSymlinks); tests give a fake one.
type Resolver func(p string) (string, error)

// Attributor places paths on volumes: each path's symlinks are followed
// (PostgreSQL's pg_wal is often a link to another volume), then the
// longest mount point that prefixes it names its mount. Resolved
// directories are remembered for one pass (many MySQL files share a few).
type Attributor struct {
	m       Mounts
	resolve Resolver
	root    string // the database's file-system root on this host; "" for /
	dirs    map[string]resolved
}

type resolved struct {
	path string
	err  error
}

// NewAttributor places paths on m's mounts; resolve nil:
// filepath.EvalSymlinks.
func NewAttributor(m Mounts, resolve Resolver) *Attributor {
	if resolve == nil {
		resolve = filepath.EvalSymlinks
	}
	return &Attributor{m: m, resolve: resolve, dirs: map[string]resolved{}}
}

// WithRoot makes a place paths as a database whose file-system root is
// root sees them (a chroot, a container's root file system): their
// symlinks are followed inside root, and the host path under root is
// placed. root "" or "/": the host's own.
func (a *Attributor) WithRoot(root string) *Attributor {
	if root != "/" {
		a.root = root
	}
	return a
}

// Place says where p lies. Only the directory is resolved for a file
// (isFile): its own name is taken as it is.
func (a *Attributor) Place(p string, isFile bool) Place {
	if p == "" {
		return Place{Why: "the database did not say where these files are"}
	}
	dir, base := p, ""
	if isFile {
		dir, base = filepath.Dir(p), filepath.Base(p)
	}
	r, ok := a.dirs[dir]
	if !ok {
		if a.root != "" {
			r.path, r.err = ResolveUnder(a.root, dir)
		} else {
			r.path, r.err = a.resolve(dir)
		}
		a.dirs[dir] = r
	}
	switch {
	case errors.Is(r.err, fs.ErrNotExist) && a.root != "":
		return Place{Why: fmt.Sprintf("%s is not under the database's root %s on this host", dir, a.root)}
	case errors.Is(r.err, fs.ErrNotExist):
		return Place{Why: fmt.Sprintf("%s is not on this host's file system (is the database in a chroot or a container? its root key names where its files are on this host)", dir)}
	case errors.Is(r.err, fs.ErrPermission):
		return Place{Why: fmt.Sprintf("%s: the agent may not look up the path (permission denied)", dir)}
	case r.err != nil:
		return Place{Why: fmt.Sprintf("%s: %v", dir, r.err)}
	}
	real := r.path
	if base != "" {
		real = filepath.Join(real, base)
	}
	return a.onMount(real)
}

// onMount is the volume under the resolved path real.
func (a *Attributor) onMount(real string) Place {
	best, bestLen := -1, -1
	for i, v := range a.m.Volumes {
		if n := prefixLen(v.GetMountPoint(), real); n > bestLen {
			best, bestLen = i, n
		}
	}
	var filtered *geometry.Filtered
	for i, f := range a.m.Filtered {
		if n := prefixLen(f.MountPoint, real); n > bestLen {
			filtered, bestLen = &a.m.Filtered[i], n
		}
	}
	switch {
	case filtered != nil:
		return a.notVolume(real, *filtered)
	case best >= 0:
		v := a.m.Volumes[best]
		return Place{MountPoint: v.GetMountPoint(), Device: v.GetDevice()}
	}
	return Place{Why: fmt.Sprintf("%s is on no mounted file system the agent discovered", real)}
}

// notVolume says why a path on a mount that is not a volume has no
// volume, or names the volume a bind mount shows (a duplicate mount of a
// volume's device).
func (a *Attributor) notVolume(real string, f geometry.Filtered) Place {
	if f.Reason == geometry.FilterDuplicate {
		dev := f.Source
		if r, err := a.resolve(f.Source); err == nil {
			dev = r
		}
		for _, v := range a.m.Volumes {
			if v.GetDevice() != "" && filepath.Base(dev) == v.GetDevice() {
				return Place{MountPoint: v.GetMountPoint(), Device: v.GetDevice()}
			}
		}
	}
	return Place{Why: fmt.Sprintf("%s is on %s (%s %s), which is not a volume: %s", real, f.MountPoint, f.FSType, f.Source, filterWords[f.Reason])}
}

// filterWords say what each geometry filter reason means for a database's
// files.
var filterWords = map[string]string{
	geometry.FilterExcluded:      "excluded by the agent's include/exclude settings",
	geometry.FilterInMemory:      "an in-memory file system, no disk under it",
	geometry.FilterNoBlockDevice: "no local block device under it (network, FUSE, overlay, btrfs or ZFS)",
	geometry.FilterUnknownDevice: "its block device is not in sysfs",
	geometry.FilterDuplicate:     "a second mount of a device whose volume the agent could not match",
}

// prefixLen is the length of mount point mp when it is p or a directory
// above p, else -1. Windows mount points (D:/, C:/SQL/) compare without
// regard to case or slash direction.
func prefixLen(mp, p string) int {
	if mp == "" {
		return -1
	}
	m, q := normal(mp), normal(p)
	if m == "/" {
		if strings.HasPrefix(q, "/") {
			return 1
		}
		return -1
	}
	m = strings.TrimSuffix(m, "/")
	if q == m || strings.HasPrefix(q, m+"/") {
		return len(m)
	}
	return -1
}

// normal is p with forward slashes, lower case when it starts with a
// drive letter.
func normal(p string) string {
	p = strings.ReplaceAll(p, `\`, "/")
	if len(p) >= 2 && p[1] == ':' {
		p = strings.ToLower(p)
	}
	return p
}

// maxLinks bounds the symlinks ResolveUnder follows (Linux's is 40).
const maxLinks = 40

// ResolveUnder is p with its symlinks followed as a process whose root is
// root sees them (an absolute link target starts again at root), as a
// path on this host under root.
func ResolveUnder(root, p string) (string, error) {
	hostRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	rest := strings.Split(filepath.ToSlash(p), "/")
	cur, links := "/", 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		host := filepath.Join(hostRoot, next)
		fi, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: errors.New("too many symlinks")}
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(filepath.ToSlash(target), "/"), rest...)
	}
	return filepath.Join(hostRoot, cur), nil
}
