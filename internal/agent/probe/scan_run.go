//go:build linux || windows

package probe

import (
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
)

// extentMapper is an open probe file that can say where it lies on its
// device (fdFile: FS_IOC_FIEMAP; winFile: FSCTL_GET_RETRIEVAL_POINTERS).
type extentMapper interface {
	extents() ([]Extent, error)
}

// scanRunner is a stripe-scan run's runner: it places 8 KiB reads to
// straddle candidate stripe-unit boundaries or to stay inside them
// (stripescan.Place) and infers the unit from their latencies
// (stripescan.Infer).
type scanRunner struct {
	placement Placement
	reads     []stripescan.Read
	extents   int
}

func (*scanRunner) check(o *Options) error { return o.validateStripeScan() }

func (s *scanRunner) place(o Options, f *probeFile, p *plan) error {
	reads, extents, err := planScan(o, f, p)
	if err != nil {
		return err
	}
	s.placement, s.reads, s.extents = scanPlacement(o.Placement), reads, extents
	return nil
}

func (s *scanRunner) answer(res *Result, opLatency []time.Duration, freshFile bool) {
	res.StripeScan = scanResult(s.placement, s.extents, s.reads, opLatency)
	if freshFile {
		res.StripeScan.withholdFresh()
	}
}

func (*scanRunner) preview(ops int, pl Placement) ([]any, string) {
	need := stripescan.MinOps()
	attrs := []any{"placement_device", pl.Device, "placement_basis", pl.Basis, "placement_offset_known", pl.Known, "placement_why", pl.Why,
		"infers_stripe_unit", ops >= need}
	if ops >= need {
		return attrs, ""
	}
	return attrs, fmt.Sprintf("a stripe-scan of %d ops cannot infer a stripe unit: it needs at least %d (omit ops for the kind's default, %d)",
		ops, need, vocab.StripeScanMaxOps)
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
