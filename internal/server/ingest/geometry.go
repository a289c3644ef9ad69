package ingest

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
	"slices"
	"strings"
	"unicode"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Geometry enumerations, from geometry.proto.
var (
	triggers   = vocab.TriggerNames()
	layerKinds = vocab.LayerKindNames()
)

func convertGeometry(g *plumblinev1.GeometrySnapshot, lim Limits) ([]store.Volume, error) {
	if !slices.Contains(triggers, g.GetTrigger()) {
		return nil, fmt.Errorf("trigger %q: want one of %s", g.GetTrigger(), strings.Join(triggers, ", "))
	}
	inv := g.GetInventory()
	if inv == nil {
		return nil, errors.New("inventory missing")
	}
	if h := inv.GetHost(); h != nil && h.GetOs() != "" && h.GetOs() != "linux" && h.GetOs() != "windows" {
		return nil, fmt.Errorf("host.os %q: want linux or windows", h.GetOs())
	}
	seen := make(map[string]bool, len(inv.GetVolumes()))
	out := make([]store.Volume, 0, len(inv.GetVolumes()))
	for i, v := range inv.GetVolumes() {
		mp := v.GetMountPoint()
		if err := checkVolume(v, lim); err != nil {
			if mp != "" {
				return nil, fmt.Errorf("volume %q: %w", mp, err)
			}
			return nil, fmt.Errorf("volumes[%d]: %w", i, err)
		}
		if seen[mp] {
			return nil, fmt.Errorf("volume %q listed twice", mp)
		}
		seen[mp] = true
		sv, err := judgeVolume(v, nil, Rules{})
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", mp, err)
		}
		out = append(out, sv)
	}
	return out, nil
}

func checkVolume(v *plumblinev1.Volume, lim Limits) error {
	if err := checkMountPoint(v.GetMountPoint()); err != nil {
		return err
	}
	if fs := v.GetFilesystem(); fs != nil {
		if err := checkBlockSize("filesystem.block_size_bytes", uint64(fs.GetBlockSizeBytes())); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			v    uint64
		}{{"stripe_unit_bytes", fs.GetStripeUnitBytes()}, {"stripe_width_bytes", fs.GetStripeWidthBytes()}, {"size_bytes", fs.GetSizeBytes()}} {
			if f.v > math.MaxInt64 {
				return fmt.Errorf("filesystem.%s %d: want at most 2^63-1", f.name, f.v)
			}
		}
	}
	var offsets uint64
	for i, l := range v.GetLayers() {
		if err := checkLayer(l); err != nil {
			name := l.GetDevice()
			if name == "" {
				name = l.GetKind()
			}
			return fmt.Errorf("layers[%d] (%s): %w", i, name, err)
		}
		// Every sum of offsets align.Evaluate makes is part of this one.
		var carry uint64
		if offsets, carry = bits.Add64(offsets, l.GetOffsetBytes(), 0); carry != 0 || offsets > math.MaxInt64 {
			return fmt.Errorf("data offset: the offsets of layers[0] to layers[%d] add up to more than 2^63-1 bytes", i)
		}
	}
	return nil
}

func checkLayer(l *plumblinev1.Layer) error {
	if !slices.Contains(layerKinds, l.GetKind()) {
		return fmt.Errorf("kind %q: want one of %s", l.GetKind(), strings.Join(layerKinds, ", "))
	}
	if lv := l.GetRaidLevel(); lv != "" && !slices.Contains(vocab.LayerRAIDLevels(), lv) {
		return fmt.Errorf("raid_level %q: want one of %s", lv, strings.Join(vocab.LayerRAIDLevels(), ", "))
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"offset_bytes", l.GetOffsetBytes()}, {"size_bytes", l.GetSizeBytes()},
		{"stripe_unit_bytes", l.GetStripeUnitBytes()}, {"stripe_width_bytes", l.GetStripeWidthBytes()},
	} {
		if f.v > math.MaxInt64 {
			return fmt.Errorf("%s %d: want at most 2^63-1", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    uint32
	}{{"logical_sector_bytes", l.GetLogicalSectorBytes()}, {"physical_sector_bytes", l.GetPhysicalSectorBytes()}} {
		if f.v != 0 && (!powerOfTwo(uint64(f.v)) || f.v < 512 || f.v > 64<<10) {
			return fmt.Errorf("%s %d: want a power of two from 512 to 65536 (or 0: unknown)", f.name, f.v)
		}
	}
	if ls, ps := l.GetLogicalSectorBytes(), l.GetPhysicalSectorBytes(); ls != 0 && ps != 0 && ps < ls {
		return fmt.Errorf("physical_sector_bytes %d below logical_sector_bytes %d", ps, ls)
	}
	if err := checkBlockSize("block_size_bytes", uint64(l.GetBlockSizeBytes())); err != nil {
		return err
	}
	if l.GetRaidDisks() > 4096 || l.GetRaidDataDisks() > l.GetRaidDisks() {
		return fmt.Errorf("raid_disks %d, raid_data_disks %d: want data disks ≤ disks ≤ 4096", l.GetRaidDisks(), l.GetRaidDataDisks())
	}
	if ao := l.AlignmentOffsetBytes; ao != nil && (*ao < -1 || *ao > math.MaxInt32) {
		return fmt.Errorf("alignment_offset_bytes %d: want -1 or 0 to 2^31-1", *ao)
	}
	return nil
}

// checkBlockSize accepts 0 (unknown) or a power of two from 512 B to 1 GiB.
func checkBlockSize(name string, v uint64) error {
	if v != 0 && (!powerOfTwo(v) || v < 512 || v > 1<<30) {
		return fmt.Errorf("%s %d: want a power of two from 512 to 2^30 (or 0: unknown)", name, v)
	}
	return nil
}

func powerOfTwo(v uint64) bool { return v != 0 && bits.OnesCount64(v) == 1 }

// checkMountPoint accepts an absolute, clean POSIX path (/, /var/lib/pgsql)
// or an absolute Windows path (C:\, D:\MSSQL\Data\, \\?\Volume{...}\).
func checkMountPoint(mp string) error {
	if mp == "" {
		return errors.New("mount_point missing")
	}
	if strings.ContainsFunc(mp, func(r rune) bool { return r == 0 || unicode.IsControl(r) }) {
		return fmt.Errorf("mount_point %q: control characters", mp)
	}
	switch {
	case strings.HasPrefix(mp, "/"):
		if path.Clean(mp) != mp {
			return fmt.Errorf("mount_point %q: want a clean absolute path (%q)", mp, path.Clean(mp))
		}
		return nil
	case len(mp) >= 3 && isLetter(mp[0]) && mp[1] == ':' && mp[2] == '\\':
		return nil
	case strings.HasPrefix(mp, `\\?\`) || strings.HasPrefix(mp, `\\.\`):
		return nil
	}
	return fmt.Errorf("mount_point %q: want an absolute path", mp)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
