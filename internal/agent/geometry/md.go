package geometry

import (
	"fmt"
	"strconv"
)

// mdLayout describes md/layout for a level, in mdadm's words. ok is false
// when the number means nothing for the level (or the level has no layout).
func mdLayout(level string, layout uint64) (desc string, copies uint64, ok bool) {
	switch level {
	case "raid10":
		// drivers/md/raid10.c: near copies in bits 0-7, far copies in bits
		// 8-15, bit 16 set for the "offset" variant of far.
		near := layout & 0xff
		far := (layout >> 8) & 0xff
		offset := layout&0x10000 != 0
		if near == 0 || far == 0 || layout>>17 != 0 {
			return "", 0, false
		}
		copies = near * far
		switch {
		case far == 1:
			desc = "near=" + strconv.FormatUint(near, 10)
		case near == 1 && offset:
			desc = "offset=" + strconv.FormatUint(far, 10)
		case near == 1:
			desc = "far=" + strconv.FormatUint(far, 10)
		case offset:
			desc = fmt.Sprintf("near=%d,offset=%d", near, far)
		default:
			desc = fmt.Sprintf("near=%d,far=%d", near, far)
		}
		return desc, copies, true
	case "raid5", "raid6", "raid4":
		// drivers/md/raid5.h ALGORITHM_* values.
		names := map[uint64]string{
			0: "left-asymmetric", 1: "right-asymmetric", 2: "left-symmetric", 3: "right-symmetric",
			4: "parity-first", 5: "parity-last",
		}
		if level == "raid6" {
			for k, v := range map[uint64]string{
				8: "rotating-zero-restart", 9: "rotating-n-restart", 10: "rotating-n-continue",
				16: "left-asymmetric-6", 17: "right-asymmetric-6", 18: "left-symmetric-6",
				19: "right-symmetric-6", 20: "parity-first-6",
			} {
				names[k] = v
			}
		}
		if level == "raid4" {
			return "", 0, false
		}
		d, ok := names[layout]
		return d, 0, ok
	}
	return "", 0, false
}

// mdDataDisks is how many members carry data in one stripe. copies is the
// raid10 copy count from the layout (0 when unknown).
func mdDataDisks(level string, disks, copies uint64) (uint64, error) {
	switch level {
	case "raid0":
		return disks, nil
	case "raid1":
		if disks == 0 {
			return 0, fmt.Errorf("raid1 with 0 disks")
		}
		return 1, nil
	case "raid4", "raid5":
		if disks < 2 {
			return 0, fmt.Errorf("%s with %d disks", level, disks)
		}
		return disks - 1, nil
	case "raid6":
		if disks < 3 {
			return 0, fmt.Errorf("%s with %d disks", level, disks)
		}
		return disks - 2, nil
	case "raid10":
		if copies == 0 {
			return 0, fmt.Errorf("raid10 copy count unknown (layout unreadable)")
		}
		if disks < copies {
			return 0, fmt.Errorf("raid10 with %d disks and %d copies", disks, copies)
		}
		// With an odd member count near=2 still spreads n/2 disks' worth
		// of data per stripe on average; report the integer share.
		return disks / copies, nil
	}
	return 0, fmt.Errorf("level %q has no data-disk count", level)
}

// declaredDataDisks is the data-disk count of a declared hardware array.
func declaredDataDisks(level string, disks, spans uint32) (uint32, error) {
	switch level {
	case "raid50", "raid60":
		if spans == 0 {
			return 0, fmt.Errorf("%s: span count not declared", level)
		}
		parity := uint32(1)
		if level == "raid60" {
			parity = 2
		}
		if disks < spans*(parity+1) {
			return 0, fmt.Errorf("%s: %d disks cannot make %d spans", level, disks, spans)
		}
		return disks - spans*parity, nil
	case "raid10":
		if disks < 2 {
			return 0, fmt.Errorf("raid10 with %d disks", disks)
		}
		return disks / 2, nil
	}
	n, err := mdDataDisks(level, uint64(disks), 0)
	return uint32(n), err
}
