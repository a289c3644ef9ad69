package geometry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// superblockReadBytes is how much of a mounted device is read for its
// superblock: XFS's sits at offset 0, ext4's at 1024 (1 KiB long).
const superblockReadBytes = 4096

// errNoMagic says the bytes do not hold this file system's superblock.
var errNoMagic = errors.New("no superblock magic")

// fsSuperblock is what discovery takes from a file-system superblock.
// Stripe values are 0 when the file system has no stripe hints.
type fsSuperblock struct {
	BlockSize   uint32
	StripeUnit  uint64 // bytes
	StripeWidth uint64 // bytes
	UUID        string
	Size        uint64 // bytes
}

// ext4 superblock layout (Documentation/filesystems/ext4/super.rst); the
// superblock starts at byte 1024 of the device.
const (
	ext4SuperOffset       = 1024
	ext4SuperLen          = 1024
	ext4BlocksCountLo     = 0x04
	ext4LogBlockSize      = 0x18
	ext4Magic             = 0x38
	ext4MagicValue        = 0xEF53
	ext4FeatureIncompat   = 0x60
	ext4UUID              = 0x68
	ext4BlocksCountHi     = 0x150
	ext4RaidStride        = 0x164
	ext4RaidStripeWidth   = 0x170
	ext4Incompat64Bit     = 0x80
	ext4MaxLogBlockSize   = 6 // 64 KiB
	ext4BaseBlockSizeLog2 = 10
)

// parseExt4Superblock reads an ext2/3/4 superblock from the first bytes of
// a device (it needs at least 2048 of them).
func parseExt4Superblock(dev []byte) (fsSuperblock, error) {
	if len(dev) < ext4SuperOffset+ext4SuperLen {
		return fsSuperblock{}, fmt.Errorf("ext4 superblock: have %d bytes, need %d", len(dev), ext4SuperOffset+ext4SuperLen)
	}
	sb := dev[ext4SuperOffset : ext4SuperOffset+ext4SuperLen]
	le := binary.LittleEndian
	if m := le.Uint16(sb[ext4Magic:]); m != ext4MagicValue {
		return fsSuperblock{}, fmt.Errorf("ext4 superblock: magic %#04x, want %#04x: %w", m, ext4MagicValue, errNoMagic)
	}
	logBS := le.Uint32(sb[ext4LogBlockSize:])
	if logBS > ext4MaxLogBlockSize {
		return fsSuperblock{}, fmt.Errorf("ext4 superblock: s_log_block_size %d out of range", logBS)
	}
	bs := uint32(1) << (ext4BaseBlockSizeLog2 + logBS)
	blocks := uint64(le.Uint32(sb[ext4BlocksCountLo:]))
	if le.Uint32(sb[ext4FeatureIncompat:])&ext4Incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[ext4BlocksCountHi:])) << 32
	}
	out := fsSuperblock{
		BlockSize:   bs,
		StripeUnit:  uint64(le.Uint16(sb[ext4RaidStride:])) * uint64(bs),
		StripeWidth: uint64(le.Uint32(sb[ext4RaidStripeWidth:])) * uint64(bs),
		UUID:        formatUUID(sb[ext4UUID : ext4UUID+16]),
	}
	if hi, lo := bits.Mul64(blocks, uint64(bs)); hi == 0 {
		out.Size = lo
	}
	return out, nil
}

// XFS superblock layout (fs/xfs/libxfs/xfs_format.h, struct xfs_dsb); big
// endian, at byte 0 of the device.
const (
	xfsMagic        = 0x00
	xfsMagicValue   = 0x58465342 // "XFSB"
	xfsBlockSize    = 0x04
	xfsDBlocks      = 0x08
	xfsUUID         = 0x20
	xfsUnit         = 0xB8 // sb_unit, in fs blocks
	xfsWidth        = 0xBC // sb_width, in fs blocks
	xfsSuperMinLen  = 0xC0
	xfsMinBlockSize = 512
	xfsMaxBlockSize = 65536
)

// parseXFSSuperblock reads an XFS superblock from the first bytes of a device.
func parseXFSSuperblock(dev []byte) (fsSuperblock, error) {
	if len(dev) < xfsSuperMinLen {
		return fsSuperblock{}, fmt.Errorf("xfs superblock: have %d bytes, need %d", len(dev), xfsSuperMinLen)
	}
	be := binary.BigEndian
	if m := be.Uint32(dev[xfsMagic:]); m != xfsMagicValue {
		return fsSuperblock{}, fmt.Errorf("xfs superblock: magic %#08x, want %#08x: %w", m, xfsMagicValue, errNoMagic)
	}
	bs := be.Uint32(dev[xfsBlockSize:])
	if bs < xfsMinBlockSize || bs > xfsMaxBlockSize || bs&(bs-1) != 0 {
		return fsSuperblock{}, fmt.Errorf("xfs superblock: sb_blocksize %d out of range", bs)
	}
	out := fsSuperblock{
		BlockSize:   bs,
		StripeUnit:  uint64(be.Uint32(dev[xfsUnit:])) * uint64(bs),
		StripeWidth: uint64(be.Uint32(dev[xfsWidth:])) * uint64(bs),
		UUID:        formatUUID(dev[xfsUUID : xfsUUID+16]),
	}
	if hi, lo := bits.Mul64(be.Uint64(dev[xfsDBlocks:]), uint64(bs)); hi == 0 {
		out.Size = lo
	}
	return out, nil
}

// parseSuperblock picks the parser for a mount table's fs type. ok is false
// for a type no parser knows.
func parseSuperblock(fsType string, dev []byte) (sb fsSuperblock, ok bool, err error) {
	switch fsType {
	case "ext2", "ext3", "ext4":
		sb, err = parseExt4Superblock(dev)
		return sb, true, err
	case "xfs":
		sb, err = parseXFSSuperblock(dev)
		return sb, true, err
	}
	return fsSuperblock{}, false, nil
}

func formatUUID(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	allZero := true
	for _, c := range b {
		if c != 0 {
			allZero = false
			break
		}
	}
	if allZero {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
