package geometry

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

// maxByIDLinks bounds the /dev/disk/by-id names kept for one device (a
// disk has a handful: ata-, wwn-, scsi-, nvme-eui., ...).
const maxByIDLinks = 8

// maxByIDEntries bounds how many /dev/disk/by-id entries are read.
const maxByIDEntries = 16 << 10

// MemberIdentity is how a member device is known beyond its kernel name,
// which a reboot may change: its /dev/disk/by-id link names and its
// serial number.
type MemberIdentity struct {
	ByID   []string // sorted, at most maxByIDLinks
	Serial string
}

// MemberIdentities reads the identity of each device in devs (kernel
// names) under the roots of o: the /dev/disk/by-id links that point at it
// (under DevRoot; none when DevRoot is empty) and the serial sysfs states
// for it or, for a partition, for its disk (device/serial, serial,
// device/wwid, wwid, then the SCSI unit serial number page
// device/vpd_pg80). What cannot be read is left empty.
func MemberIdentities(o Options, devs []string) map[string]MemberIdentity {
	want := map[string]bool{}
	for _, d := range devs {
		want[d] = true
	}
	out := make(map[string]MemberIdentity, len(devs))
	links := byIDLinks(root(o.DevRoot), want)
	var dirs map[string]root
	if o.SysfsRoot != "" {
		dirs = blockDirs(root(filepath.Clean(o.SysfsRoot)), want)
	}
	for _, d := range devs {
		id := MemberIdentity{ByID: links[d]}
		if dir, ok := dirs[d]; ok {
			id.Serial = WireSerial(sysfsSerial(dir))
		}
		out[d] = id
	}
	return out
}

// blockDirs finds the sysfs directory of each wanted kernel name:
// class/block/<name> (2.6.25 and later), block/<name>, else through the
// /sys/dev/block/MAJ:MIN links (trees that have only those).
func blockDirs(sys root, want map[string]bool) map[string]root {
	out := map[string]root{}
	for name := range want {
		for _, c := range []root{sys.Sub("class", "block", name), sys.Sub("block", name)} {
			if p, err := filepath.EvalSymlinks(string(c)); err == nil {
				out[name] = root(p)
				break
			}
		}
	}
	if len(out) == len(want) {
		return out
	}
	f, err := os.Open(sys.Path("dev", "block"))
	if err != nil {
		return out
	}
	defer f.Close()
	names, _ := f.Readdirnames(maxByIDEntries)
	for _, n := range names {
		p, err := filepath.EvalSymlinks(sys.Path("dev", "block", n))
		if err != nil {
			continue
		}
		if b := filepath.Base(p); want[b] {
			if _, ok := out[b]; !ok {
				out[b] = root(p)
			}
		}
	}
	return out
}

// byIDLinks maps each wanted kernel name to the /dev/disk/by-id names
// whose links resolve to it.
func byIDLinks(dev root, want map[string]bool) map[string][]string {
	out := map[string][]string{}
	if dev == "" {
		return out
	}
	dir := dev.Path("disk", "by-id")
	f, err := os.Open(dir)
	if err != nil {
		return out
	}
	defer f.Close()
	names, _ := f.Readdirnames(maxByIDEntries)
	sort.Strings(names)
	for _, n := range names {
		t, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		k := linkedName(t)
		if want[k] && len(out[k]) < maxByIDLinks && wireName(n) {
			out[k] = append(out[k], n)
		}
	}
	return out
}

// maxNameBytes bounds a by-id link name and a serial on the wire
// (NAME_MAX; the server refuses a longer one).
const maxNameBytes = 255

// wireName says whether a by-id link name can go on the wire as the server
// wants it: 1 to 255 bytes, no '/', space or control character (udev
// writes such names; anything else is left out rather than have the
// interval refused).
func wireName(s string) bool {
	if s == "" || len(s) > maxNameBytes {
		return false
	}
	for _, r := range s {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// WireSerial is s when it can go on the wire (at most 255 bytes, no
// control character), else "".
func WireSerial(s string) string {
	if len(s) > maxNameBytes || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return ""
	}
	return s
}

// linkedName is the kernel name (sysfs's spelling) of the device a
// /dev/disk/by-id link points at: ../../sdb1 is sdb1, ../../cciss/c0d0
// is cciss!c0d0.
func linkedName(target string) string {
	if filepath.IsAbs(target) {
		return filepath.Base(target)
	}
	rel := filepath.ToSlash(filepath.Join("disk", "by-id", target))
	return strings.ReplaceAll(rel, "/", "!")
}

// sysfsSerial is the serial sysfs states for the device at dir or, for a
// partition, for its disk; "" when none is readable.
func sysfsSerial(dir root) string {
	if _, err := os.Stat(dir.Path("partition")); err == nil {
		dir = dir.Parent()
	}
	for _, p := range []string{dir.Path("device", "serial"), dir.Path("serial"), dir.Path("device", "wwid"), dir.Path("wwid")} {
		if b, err := readMemberAttr(p); err == nil {
			if s, err := parseSysfsString(b); err == nil {
				return s
			}
		}
	}
	if b, err := readMemberAttr(dir.Path("device", "vpd_pg80")); err == nil {
		return parseVPDSerial(b)
	}
	return ""
}

// readMemberAttr reads at most maxSysfsValue+1 bytes of p.
func readMemberAttr(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSysfsValue+1))
}

// parseVPDSerial parses SCSI VPD page 0x80 (Unit Serial Number, SPC-4
// 7.8.15): a 4-byte header whose bytes 2–3 are the length, then the
// serial in ASCII, space-padded. "" when the page is not one.
func parseVPDSerial(b []byte) string {
	if len(b) < 4 || b[1] != 0x80 {
		return ""
	}
	n := int(b[2])<<8 | int(b[3])
	if n > len(b)-4 {
		n = len(b) - 4
	}
	s := strings.TrimSpace(string(b[4 : 4+n]))
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			if r != ' ' {
				return ""
			}
		}
	}
	return s
}

// MDStates reads md members' dev-*/state afresh between discoveries: a
// member can turn faulty, or a spare start rebuilding, in the minutes
// before the next geometry refresh, and its I/O means something else then.
type MDStates struct {
	dirs map[string]root // group device -> its md/ directory
}

// NewMDStates finds the md/ directory of every group under the sysfs root
// of o that has one (md arrays; other groups have none).
func NewMDStates(o Options, groups []MemberGroup) *MDStates {
	s := &MDStates{dirs: map[string]root{}}
	if o.SysfsRoot == "" {
		return s
	}
	want := map[string]bool{}
	for _, g := range groups {
		if g.MD() {
			want[g.Device] = true
		}
	}
	for dev, dir := range blockDirs(root(filepath.Clean(o.SysfsRoot)), want) {
		if st, err := os.Stat(dir.Path("md")); err == nil && st.IsDir() {
			s.dirs[dev] = dir.Sub("md")
		}
	}
	return s
}

// State is member's dev-*/state in the md array group now; ok is false
// when the array has no md/ directory or the file cannot be read (the
// member left the array). A nil MDStates has none.
func (s *MDStates) State(group, member string) (flags []string, ok bool) {
	if s == nil {
		return nil, false
	}
	dir, found := s.dirs[group]
	if !found {
		return nil, false
	}
	b, err := readMemberAttr(dir.Path("dev-"+member, "state"))
	if err != nil {
		return nil, false
	}
	flags, err = parseMDMemberState(b)
	return flags, err == nil
}
