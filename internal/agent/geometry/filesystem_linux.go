package geometry

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
)

// joinOptions joins the per-mount and super options, each option once
// ("rw" is in both).
func joinOptions(a, b string) string {
	var out []string
	seen := map[string]bool{}
	for _, o := range strings.Split(a+","+b, ",") {
		if o != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return strings.Join(out, ",")
}

// filesystemLayer reads what the mount table, statfs and the superblock say
// about the mounted file system.
func (d *discoverer) filesystemLayer(m mountInfo, dir root) *plumblinev1.Layer {
	l := &plumblinev1.Layer{
		Kind:        KindFilesystem,
		Device:      m.Source,
		FsType:      m.FSType,
		OffsetBytes: proto.Uint64(0),
		Source:      SourceMountTable,
		Sources: map[string]string{
			// The mount table places the file system at the start of
			// its device.
			"offset_bytes": SourceMountTable,
			"fs_type":      SourceMountTable,
		},
	}
	if d.opts.StatMounts {
		if bs, err := statBlockSize(m.MountPoint); err != nil {
			addUnknown(l, "block_size_bytes", err.Error())
		} else {
			l.BlockSizeBytes = bs
			l.Sources["block_size_bytes"] = SourceStatfs
			l.Source = SourceStatfs
		}
	}

	// Stripe hints from the mount options.
	opts := joinOptions(m.Options, m.SuperOptions)
	switch m.FSType {
	case "xfs":
		if v, ok := mountOption(opts, "sunit"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				l.StripeUnitBytes = n * sectorBytes
				l.Sources["stripe_unit_bytes"] = SourceMountOptions
			}
		}
		if v, ok := mountOption(opts, "swidth"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				l.StripeWidthBytes = n * sectorBytes
				l.Sources["stripe_width_bytes"] = SourceMountOptions
			}
		}
	}
	ext4Stripe := uint64(0)
	if strings.HasPrefix(m.FSType, "ext") {
		if v, ok := mountOption(opts, "stripe"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				ext4Stripe = n
			}
		}
	}

	if d.opts.ReadSuperblocks && dir != "" {
		d.readSuperblock(l, m, dir.Base())
	}
	if ext4Stripe > 0 && l.Sources["stripe_width_bytes"] != SourceSuperblock {
		if l.BlockSizeBytes == 0 {
			addUnknown(l, "stripe_width_bytes", fmt.Sprintf("mount option stripe=%d is in file-system blocks and the block size is unknown", ext4Stripe))
		} else {
			l.StripeWidthBytes = ext4Stripe * uint64(l.BlockSizeBytes)
			l.Sources["stripe_width_bytes"] = SourceMountOptions
		}
	}
	if l.BlockSizeBytes == 0 && !hasUnknown(l, "block_size_bytes") {
		switch {
		case !d.opts.StatMounts && !d.opts.ReadSuperblocks:
			addUnknown(l, "block_size_bytes", "statfs and superblock reads are off (captured tree)")
		default:
			addUnknown(l, "block_size_bytes", "no source gave the block size of "+m.FSType)
		}
	}
	if l.StripeUnitBytes == 0 && !hasUnknown(l, "stripe_unit_bytes") {
		addUnknown(l, "stripe_unit_bytes", "no stripe unit hint in the mount options"+superblockWord(l))
	}
	if l.StripeWidthBytes == 0 && !hasUnknown(l, "stripe_width_bytes") {
		addUnknown(l, "stripe_width_bytes", "no stripe width hint in the mount options"+superblockWord(l))
	}
	return l
}

func superblockWord(l *plumblinev1.Layer) string {
	if l.Source == SourceSuperblock {
		return " or the superblock"
	}
	return ""
}

// readSuperblock reads the first 4 KiB of the mounted device (by its
// kernel name under DevRoot) and takes block size, stripe hints, uuid and
// size from it. The superblock wins over mount options.
func (d *discoverer) readSuperblock(l *plumblinev1.Layer, m mountInfo, kname string) {
	devPath := d.dev.Path(kname)
	buf, err := readDeviceHead(devPath, m.Major, m.Minor, superblockReadBytes)
	if err != nil {
		addUnknown(l, "uuid", "superblock: "+err.Error())
		return
	}
	if d.rec != nil {
		d.rec.file(devPath, buf)
	}
	sb, known, err := parseSuperblock(m.FSType, buf)
	if !known {
		addUnknown(l, "uuid", "no superblock parser for "+m.FSType)
		return
	}
	if err != nil {
		addUnknown(l, "uuid", fmt.Sprintf("%s: %v", devPath, err))
		return
	}
	l.Source = SourceSuperblock
	l.BlockSizeBytes = sb.BlockSize
	l.Sources["block_size_bytes"] = SourceSuperblock
	setKnown(l, "uuid", &l.Uuid, sb.UUID, SourceSuperblock)
	setKnown(l, "size_bytes", &l.SizeBytes, sb.Size, SourceSuperblock)
	setKnown(l, "stripe_unit_bytes", &l.StripeUnitBytes, sb.StripeUnit, SourceSuperblock)
	setKnown(l, "stripe_width_bytes", &l.StripeWidthBytes, sb.StripeWidth, SourceSuperblock)
}

// statBlockSize is the file-system block size statfs(2) reports for a
// mount point.
func statBlockSize(mountPoint string) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mountPoint, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", mountPoint, err)
	}
	if st.Bsize <= 0 || st.Bsize > 1<<30 {
		return 0, fmt.Errorf("statfs %s: block size %d out of range", mountPoint, st.Bsize)
	}
	return uint32(st.Bsize), nil
}

// readDeviceHead reads the first n bytes of a mounted device, read-only,
// without following symlinks. A block device node must carry the device
// number the mount table gives; a regular file (a captured superblock) is
// read as is.
func readDeviceHead(path string, major, minor uint32, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *PathError names the path
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		if unix.Major(st.Rdev) != major || unix.Minor(st.Rdev) != minor {
			return nil, fmt.Errorf("%s is device %d:%d, the mount table says %d:%d", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, minor)
		}
	case unix.S_IFREG:
	default:
		return nil, fmt.Errorf("%s is neither a block device nor a captured superblock file", path)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf[:got], nil
}
