package geometry

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// recorder sees every file, link and directory discovery reads; the capture
// test uses it to copy exactly those into a fixture tree.
type recorder interface {
	file(path string, data []byte)
	link(path, target string)
	dir(path string)
}

// resolveLink resolves a sysfs symlink; it must stay inside the sysfs root.
func (d *discoverer) resolveLink(link string) (root, error) {
	target, err := os.Readlink(link)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("read link %s: %w", d.rel(link), err)
	}
	if d.rec != nil {
		d.rec.link(link, target)
	}
	if filepath.IsAbs(target) {
		return "", fmt.Errorf("link %s -> %s is absolute; it must stay inside the sysfs root", d.rel(link), target)
	}
	res := filepath.Join(filepath.Dir(link), target)
	if r, err := filepath.Rel(string(d.sys), res); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("link %s -> %s escapes the sysfs root", d.rel(link), target)
	}
	return root(res), nil
}

// zeroMeans says what a sysfs number of 0 stands for.
type zeroMeans bool

const (
	// zeroUnknown: the kernel writes 0 for "no value" (sizes, sector
	// sizes, I/O hints); the field becomes an unknown.
	zeroUnknown zeroMeans = false
	// zeroValue: 0 is a real value (a partition's start sector, the
	// partition number some old kernels report).
	zeroValue zeroMeans = true
)

// readUint reads one sysfs number, scales it and hands it to set with its
// source, or records why it could not.
func (d *discoverer) readUint(l *plumblinev1.Layer, field, p string, scale uint64, zero zeroMeans, src string, set func(uint64)) {
	b, err := d.readFile(p)
	d.setUint(l, field, p, b, err, scale, zero, src, set)
}

// readUintOr is readUint of p, or of old when p does not exist (a kernel
// that predates p and wrote the value to old).
func (d *discoverer) readUintOr(l *plumblinev1.Layer, field, p, old string, zero zeroMeans, src string, set func(uint64)) {
	b, err := d.readFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		if ob, oerr := d.readFile(old); oerr == nil {
			p, b, err = old, ob, nil
		}
	}
	d.setUint(l, field, p, b, err, 1, zero, src, set)
}

// setUint parses what was read from p (b, or the read's error) into field.
func (d *discoverer) setUint(l *plumblinev1.Layer, field, p string, b []byte, err error, scale uint64, zero zeroMeans, src string, set func(uint64)) {
	var v uint64
	if err == nil {
		v, err = parseSysfsUint(b)
	}
	if err == nil && scale > 1 && v > ^uint64(0)/scale {
		err = fmt.Errorf("value %d overflows when scaled by %d", v, scale)
	}
	if err != nil {
		addUnknown(l, field, d.reason(p, err))
		return
	}
	v *= scale
	if v == 0 && zero == zeroUnknown {
		addUnknown(l, field, d.rel(p)+": the kernel reports 0 (no value)")
		return
	}
	set(v)
	l.Sources[field] = src
}

func (d *discoverer) readString(p string) (string, error) {
	b, err := d.readFile(p)
	if err != nil {
		return "", err
	}
	return parseSysfsString(b)
}

func (d *discoverer) readFile(p string) ([]byte, error) {
	return d.readFileLimit(p, maxSysfsValue+1)
}

func (d *discoverer) readFileLimit(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("read %s: longer than %d bytes", p, limit)
	}
	d.recFile(p, buf)
	return buf, nil
}

func (d *discoverer) exists(p string) bool {
	st, err := os.Stat(p)
	if err != nil {
		return false
	}
	if d.rec != nil {
		if st.IsDir() {
			d.rec.dir(p)
		} else if st.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				d.rec.file(p, b)
			}
		}
	}
	return true
}

func (d *discoverer) recFile(p string, b []byte) {
	if d.rec != nil {
		d.rec.file(p, b)
	}
}

func (d *discoverer) recDir(p string) {
	if d.rec != nil {
		d.rec.dir(p)
	}
}

// rel names a path relative to the sysfs root for messages.
func (d *discoverer) rel(p string) string {
	if r, err := filepath.Rel(string(d.sys), p); err == nil && !strings.HasPrefix(r, "..") {
		return "sysfs " + r
	}
	return p
}

// reason is an unknown's reason for a failed read or parse of p.
func (d *discoverer) reason(p string, err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return d.rel(p) + ": absent"
	case errors.As(err, &pe):
		return d.rel(p) + ": " + pe.Err.Error()
	case err == nil:
		return d.rel(p) + ": unreadable"
	}
	return d.rel(p) + ": " + err.Error()
}

// emptyDir says whether dir lists nothing (or cannot be listed).
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
