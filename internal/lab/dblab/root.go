//go:build linux

package dblab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Root is a Debian root file system unpacked from a tarball (made by
// bench/db-attribution/rootfs.sh) with the host's /proc and /dev and the
// caller's directories bind-mounted into it at the same paths, so that a
// database running in it names its files as the host sees them — the
// agent, on the host, attributes them through the host's mount table.
type Root struct {
	Dir    string
	mounts []string // mounted inside Dir, in order
}

// OpenRoot unpacks tarball into dir (once: an existing dir/etc/passwd
// is kept) and mounts /proc, /dev, /dev/shm and each of binds at the same
// path inside it.
func OpenRoot(ctx context.Context, tarball, dir string, binds ...string) (*Root, error) {
	if _, err := os.Stat(filepath.Join(dir, "etc", "passwd")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if _, err := run(ctx, "tar", "-C", dir, "-xf", tarball); err != nil {
			return nil, err
		}
	}
	r := &Root{Dir: dir}
	if _, err := run(ctx, "mount", "-t", "proc", "proc", filepath.Join(dir, "proc")); err != nil {
		return nil, err
	}
	r.mounts = append(r.mounts, filepath.Join(dir, "proc"))
	for _, b := range append([]string{"/dev", "/dev/shm"}, binds...) {
		if err := r.Bind(ctx, b); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Bind mounts the host's path at the same path inside the root.
func (r *Root) Bind(ctx context.Context, path string) error {
	target := filepath.Join(r.Dir, path)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if _, err := run(ctx, "mount", "--bind", path, target); err != nil {
		return err
	}
	r.mounts = append(r.mounts, target)
	return nil
}

// Close unmounts what OpenRoot and Bind mounted (the unpacked tree stays).
func (r *Root) Close() error {
	var errs []error
	for _, m := range slices.Backward(r.mounts) {
		if _, err := run(context.Background(), "umount", "-l", m); err != nil && !strings.Contains(err.Error(), "not mounted") {
			errs = append(errs, err)
		}
	}
	r.mounts = nil
	return errors.Join(errs...)
}

// command returns the argv that runs name with args as user inside the
// root, or on the host when r is nil.
func (r *Root) command(user string, name string, args ...string) ([]string, error) {
	if r == nil {
		return append([]string{"runuser", "-u", user, "--", name}, args...), nil
	}
	uid, gid, err := ids(r.Dir, user)
	if err != nil {
		return nil, err
	}
	return append([]string{"chroot", fmt.Sprintf("--userspec=%d:%d", uid, gid), r.Dir, "env", "HOME=/tmp", "LANG=C", name}, args...), nil
}

// rootDir is "/" for the host, else the root's directory.
func (r *Root) rootDir() string {
	if r == nil {
		return "/"
	}
	return r.Dir
}
