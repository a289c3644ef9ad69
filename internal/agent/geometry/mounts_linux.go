package geometry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// readMounts reads the mount table: <procfs>/self/mountinfo, or on
// kernels before 2.6.26, which have none, <procfs>/mounts with each
// block device's number found in sysfs by the source's name.
func (d *discoverer) readMounts() ([]mountInfo, error) {
	mi := d.proc.Path("self", "mountinfo")
	raw, err := os.ReadFile(mi)
	if err == nil {
		d.recFile(mi, raw)
		mounts, bad := parseMountInfo(raw)
		for _, e := range bad {
			d.warnings = append(d.warnings, e.Error())
		}
		return mounts, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w: %w", mi, ErrRoot, err)
	}
	pm := d.proc.Path("mounts")
	raw, err2 := os.ReadFile(pm)
	if err2 != nil {
		return nil, fmt.Errorf("read %s: %w: %w (and %s: %w)", mi, ErrRoot, err, pm, err2)
	}
	d.recFile(pm, raw)
	mounts, bad := parseProcMounts(raw)
	for _, e := range bad {
		d.warnings = append(d.warnings, e.Error())
	}
	devs := d.blockDevices()
	var unresolved []string
	for i := range mounts {
		m := &mounts[i]
		if _, pseudo := pseudoFSTypes[m.FSType]; pseudo || !strings.HasPrefix(m.Source, "/dev/") {
			continue
		}
		dir, ok := d.mountSourceDir(m.Source, devs)
		if ok {
			if b, err := d.readFile(dir.Path("dev")); err == nil {
				if s, err := parseSysfsString(b); err == nil {
					if ma, mi, err := parseDevNumber(s); err == nil {
						m.Major, m.Minor = ma, mi
						continue
					}
				}
			}
		}
		m.Unresolved = true
		unresolved = append(unresolved, m.Source+" ("+m.MountPoint+")")
	}
	if len(unresolved) > 0 {
		d.warnings = append(d.warnings, fmt.Sprintf("%s has no mountinfo (Linux before 2.6.26) and %s names no block device sysfs knows: %s", d.proc, pm, strings.Join(unresolved, ", ")))
	}
	return mounts, nil
}

// mountSourceDir finds the sysfs directory of a mount source from
// /proc/mounts: /dev/sda1 and /dev/md0 by kernel name, /dev/mapper/NAME by
// the dm name, links under DevRoot (/dev/disk/by-uuid/...) by following them.
func (d *discoverer) mountSourceDir(src string, devs map[string]root) (root, bool) {
	if name, ok := strings.CutPrefix(src, "/dev/mapper/"); ok {
		for _, dir := range devs {
			if n, err := d.readString(dir.Path("dm", "name")); err == nil && n == name {
				return dir, true
			}
		}
	}
	if n, ok := d.devLinkName(src); ok {
		if dir, ok := devs[n]; ok {
			return dir, true
		}
	}
	dir, ok := devs[filepath.Base(src)]
	return dir, ok
}

// devLinkName follows a /dev path's symlinks under DevRoot (at most 16,
// never out of /dev) and returns the name it ends at: /dev/disk/by-id/x
// -> sdb. ok is false when the path is not under /dev or DevRoot is unset.
func (d *discoverer) devLinkName(p string) (string, bool) {
	if !strings.HasPrefix(p, "/dev/") || d.dev == "" {
		return "", false
	}
	host := d.dev.Path(strings.TrimPrefix(p, "/dev/"))
	for range 16 {
		target, err := os.Readlink(host)
		if err != nil {
			break
		}
		if filepath.IsAbs(target) {
			if !strings.HasPrefix(target, "/dev/") {
				break
			}
			host = d.dev.Path(strings.TrimPrefix(target, "/dev/"))
		} else {
			host = filepath.Join(filepath.Dir(host), target)
		}
	}
	return filepath.Base(host), true
}

// pseudoFSTypes are file systems never reported as volumes, even when the
// mount table gives them a block device number. The value is the reason
// Result.Filtered gives; "" for kernel interfaces that are never a volume
// and are not listed at all.
var pseudoFSTypes = map[string]string{
	"proc": "", "sysfs": "", "devtmpfs": "", "autofs": "", "cgroup": "", "cgroup2": "", "devpts": "", "mqueue": "",
	"debugfs": "", "tracefs": "", "securityfs": "", "pstore": "", "bpf": "", "configfs": "", "fusectl": "",
	"hugetlbfs": "", "efivarfs": "", "binfmt_misc": "", "swap": "", "nsfs": "", "rpc_pipefs": "",
	"tmpfs": FilterInMemory, "ramfs": FilterInMemory,
	"overlay": FilterNoBlockDevice, "nfs": FilterNoBlockDevice, "nfs4": FilterNoBlockDevice, "cifs": FilterNoBlockDevice,
	"smb3": FilterNoBlockDevice, "smbfs": FilterNoBlockDevice, "ceph": FilterNoBlockDevice,
}

// preferMount says whether a is a better representative of a device than
// b: a mount of the file system's root beats a bind mount of a
// subdirectory, then the shorter mount point wins.
func preferMount(a, b mountInfo) bool {
	if (a.Root == "/") != (b.Root == "/") {
		return a.Root == "/"
	}
	return len(a.MountPoint) < len(b.MountPoint)
}

// selected says whether m is a volume candidate, and if not, why (a
// Filtered reason, or "" for a kernel interface never mentioned).
func (d *discoverer) selected(m mountInfo) (bool, string) {
	if reason, ok := pseudoFSTypes[m.FSType]; ok {
		return false, reason
	}
	if m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse.") {
		return false, FilterNoBlockDevice
	}
	o := d.opts
	switch {
	case len(o.IncludeMountPoints) > 0 && !matchAny(o.IncludeMountPoints, m.MountPoint),
		matchAny(o.ExcludeMountPoints, m.MountPoint),
		len(o.IncludeFSTypes) > 0 && !slices.Contains(o.IncludeFSTypes, m.FSType),
		slices.Contains(o.ExcludeFSTypes, m.FSType):
		return false, FilterExcluded
	}
	return true, ""
}

func matchAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// candidate is a mount that becomes a volume: one per block device.
type candidate struct {
	m   mountInfo
	dir root  // resolved sysfs device dir, "" when the link is odd
	err error // why dir could not be resolved
}

// candidates picks the mounts that become volumes, one per block device
// (preferMount decides between mounts of the same device), and says why
// each other mount was left out.
func (d *discoverer) candidates(mounts []mountInfo) (cands []candidate, filtered []Filtered) {
	byDev := map[[2]uint32]int{}
	filter := func(m mountInfo, reason string) {
		filtered = append(filtered, Filtered{MountPoint: m.MountPoint, FSType: m.FSType, Source: m.Source, Reason: reason})
	}
	for _, m := range mounts {
		if ok, reason := d.selected(m); !ok {
			if reason != "" {
				filter(m, reason)
			}
			continue
		}
		if m.Unresolved {
			filter(m, FilterUnknownDevice) // /proc/mounts names a /dev path sysfs does not know
			continue
		}
		if m.Major == 0 {
			filter(m, FilterNoBlockDevice)
			continue
		}
		dir, err := d.deviceDir(m.Major, m.Minor)
		if errors.Is(err, fs.ErrNotExist) {
			filter(m, FilterUnknownDevice) // not a block device this sysfs knows
			continue
		}
		c := candidate{m: m, dir: dir, err: err}
		key := [2]uint32{m.Major, m.Minor}
		if i, ok := byDev[key]; ok {
			if preferMount(m, cands[i].m) {
				filter(cands[i].m, FilterDuplicate)
				cands[i] = c
			} else {
				filter(m, FilterDuplicate)
			}
			continue
		}
		byDev[key] = len(cands)
		cands = append(cands, c)
	}
	return cands, filtered
}
