package geometry

// MountPoints returns the mount points listed in a /proc/<pid>/mountinfo
// file, unescaped (\040 is a space), in file order. Lines that do not
// parse are skipped; bad says why. It is the one mountinfo parser for the
// code outside this package (the server's dev mode finds the mount point
// of its probe directory with it).
func MountPoints(mountinfo []byte) (mountPoints []string, bad []error) {
	mounts, bad := parseMountInfo(mountinfo)
	for _, m := range mounts {
		mountPoints = append(mountPoints, m.MountPoint)
	}
	return mountPoints, bad
}
