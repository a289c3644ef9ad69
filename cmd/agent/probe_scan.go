package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/bytesize"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// volumeHolding discovers the volumes and returns the one whose mount
// point holds dir (the longest that does); nil when none does or discovery
// fails — the stripe-scan then says its offsets are relative to the file
// system's device.
func volumeHolding(ctx context.Context, dir, procRoot, sysRoot string) *plumblinev1.Volume {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	opts := geometry.DefaultOptions()
	opts.ProcfsRoot, opts.SysfsRoot = procRoot, sysRoot
	vols, err := geometry.Discover(ctx, opts)
	if err != nil {
		return nil
	}
	var best *plumblinev1.Volume
	for _, v := range vols {
		mp := v.GetMountPoint()
		if !within(abs, mp) || best != nil && len(mp) <= len(best.GetMountPoint()) {
			continue
		}
		best = v
	}
	return best
}

// within says whether path is mount or below it.
func within(path, mount string) bool {
	if mount == "" {
		return false
	}
	rel, err := filepath.Rel(mount, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// printStripeScan adds a stripe-scan's answer to the probe table.
func printStripeScan(w io.Writer, s *probe.StripeScanResult) {
	pl := s.Placement
	where := pl.Basis
	if pl.Known {
		where = fmt.Sprintf("%s %s, file system at byte %d", pl.Basis, pl.Device, pl.Offset)
	} else if pl.Why != "" {
		where += ": " + pl.Why
	}
	fmt.Fprintf(w, "placement\t%s (%d extents)\n", where, s.Extents)
	if s.Unit == 0 {
		fmt.Fprintf(w, "stripe unit\tnone (%s)\n", s.Reason)
	} else {
		fmt.Fprintf(w, "stripe unit\t%s, confidence %.4f\n", bytesize.Size(s.Unit), s.Confidence)
		fmt.Fprintf(w, "straddle cost\t%s per split read (%s to %s)\n", signedSecs(s.StraddleCost), signedSecs(s.StraddleCostLow), signedSecs(s.StraddleCostHigh))
	}
	for _, c := range s.Candidates {
		mark := ""
		if c.Significant {
			mark = " *"
		}
		fmt.Fprintf(w, "  %s\tshift %s (%s to %s), P(slower) %.2f, adj. p %.2g, %d straddles%s\n",
			bytesize.Size(c.Unit), signedSecs(c.Shift), signedSecs(c.ShiftLow), signedSecs(c.ShiftHigh), c.Superiority, c.AdjustedP, c.Straddles, mark)
	}
}

func signedSecs(s float64) string {
	if s < 0 {
		return "-" + secs(-s)
	}
	return secs(s)
}
