package geometry

import "path/filepath"

// root is a directory the host's interfaces are read under: /sys, /proc,
// /dev, /etc, or their copies in a captured tree. Paths below it are
// built with Path, never joined by hand (procfs' FS does the same).
type root string

// Path is elem joined below the root. An empty root leaves elem as it is,
// relative.
func (r root) Path(elem ...string) string {
	return filepath.Join(append([]string{string(r)}, elem...)...)
}

// roots are the directories discovery reads under, from Options.
type roots struct {
	sys       root // cleaned SysfsRoot
	proc      root // ProcfsRoot
	dev       root // DevRoot; "" when device links and superblocks are not read
	etc       root // EtcRoot; "" when the machine id is not read
	lvmBackup root // LVMBackupDir; "" when LVM metadata is not read
}

func newRoots(o Options) roots {
	return roots{
		sys:       root(filepath.Clean(o.SysfsRoot)),
		proc:      root(o.ProcfsRoot),
		dev:       root(o.DevRoot),
		etc:       root(o.EtcRoot),
		lvmBackup: root(o.LVMBackupDir),
	}
}

// Sub is the directory elem below the root, as a root of its own (a
// device's sysfs directory, its queue/).
func (r root) Sub(elem ...string) root { return root(r.Path(elem...)) }

// Base is the root's last element: a device directory's kernel name.
func (r root) Base() string { return filepath.Base(string(r)) }

// Parent is the directory that holds the root.
func (r root) Parent() root { return root(filepath.Dir(string(r))) }
