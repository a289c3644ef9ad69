//go:build linux || windows

package probe

import (
	"fmt"

	"github.com/plumbline/plumbline/internal/stripescan"
)

// extentMapper is an open probe file that can say where it lies on its
// device (fdFile: FS_IOC_FIEMAP; winFile: FSCTL_GET_RETRIEVAL_POINTERS).
type extentMapper interface {
	extents() ([]Extent, error)
}

// planScan maps the open probe file and places the run's reads; p's
// schedule becomes their file offsets.
func planScan(o Options, f *probeFile, p *plan) ([]stripescan.Read, int, error) {
	em, ok := f.file.(extentMapper)
	if !ok {
		return nil, 0, fmt.Errorf("%w: stripe-scan: this probe file cannot report its extents", ErrNotSupported)
	}
	ext, err := em.extents()
	if err != nil {
		return nil, 0, fmt.Errorf("stripe-scan: where %s lies: %w", f.path, err)
	}
	base := o.Placement.Offset
	if !o.Placement.Known {
		base = 0
	}
	reads, err := stripescan.Place(stripescan.Layout{
		Extents:   ext,
		Base:      base,
		DataStart: HeaderSize,
		DataEnd:   o.FileSize,
		Align:     int64(max(scanAlign, f.memAlign)),
	}, o.Ops, p.seed)
	if err != nil {
		return nil, 0, fmt.Errorf("stripe-scan: %w", err)
	}
	p.schedule = make([]int64, len(reads))
	for i, r := range reads {
		p.schedule[i] = r.FileOffset
	}
	return reads, len(ext), nil
}
