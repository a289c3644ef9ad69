package render

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Table writes an inventory the way an SRE reads it at a glance: one line
// per volume, then every finding with its fix.
func Table(w io.Writer, inv *plumblinev1.Inventory) error {
	h := inv.GetHost()
	name := h.GetHostname()
	if name == "" {
		name = "unknown" // a captured tree that names no host
	}
	fmt.Fprintf(w, "host %s (%s %s)\n\n", name, orDash(h.GetOs()), orDash(h.GetKernel()))
	if len(inv.GetVolumes()) == 0 {
		_, err := fmt.Fprintln(w, "no block-backed file systems found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// OFFSET SPLIT is what the offset adds (what re-partitioning removes);
	// GRAIN SPLIT splits at any offset, from I/Os placed on a grid finer
	// than their size (the allocation unit), and is no misalignment.
	sizes := splitSizes()
	fmt.Fprintf(tw, "MOUNT\tFS\tCLUSTER\tOFFSET\tSTRIPE\tRAID\tVERDICT\tOFFSET SPLIT %s\tGRAIN SPLIT %s\tWORST FINDING\n", sizes, sizes)
	for _, v := range inv.GetVolumes() {
		a := v.GetAlignment()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			v.GetMountPoint(),
			orDash(v.GetFilesystem().GetType()),
			size(uint64(v.GetFilesystem().GetBlockSizeBytes())),
			offset(a.DataOffsetBytes, a.DiskOffsetBytes),
			stripeCell(a),
			raidCell(v),
			orDash(a.GetVerdict()),
			splitCell(a.GetSplitFraction()),
			splitCell(a.GetGranularitySplitFraction()),
			worst(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range inv.GetVolumes() {
		fs := v.GetAlignment().GetFindings()
		if len(fs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%s):\n", v.GetMountPoint(), v.GetDevice())
		for _, f := range fs {
			fmt.Fprintf(w, "  %-8s %s: %s\n", f.GetSeverity(), f.GetRule(), f.GetMessage())
			if f.GetRemediation() != "" {
				fmt.Fprintf(w, "           fix: %s\n", f.GetRemediation())
			}
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// size writes a byte count with the largest binary unit it is a whole or
// half multiple of: 4KiB, 1MiB, 31.5KiB; "-" when unknown (0).
func size(n uint64) string {
	if n == 0 {
		return "-"
	}
	return bytesize.Size(n).Human()
}

func offset(data, disk *uint64) string {
	switch {
	case data != nil:
		if *data == 0 {
			return "0"
		}
		return size(*data)
	case disk != nil:
		if *disk == 0 {
			return "0"
		}
		return size(*disk)
	}
	return "?"
}

// stripeCell is the stripe unit and where it comes from: "64KiB (declared)";
// a unit the geometry probe inferred says how sure it is, rounded down so
// that an inference never reads as certain: "64KiB (measured 99.7%)".
func stripeCell(a *plumblinev1.Alignment) string {
	if a.GetStripeUnitBytes() == 0 {
		return "-"
	}
	src := a.GetStripeUnitSource()
	if c := a.GetStripeUnitConfidence(); src == align.SourceMeasured && c > 0 && c <= 1 {
		src += " " + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.1f", math.Floor(c*1000)/10), "0"), ".") + "%"
	}
	return fmt.Sprintf("%s (%s)", size(a.GetStripeUnitBytes()), src)
}

func raidCell(v *plumblinev1.Volume) string {
	for _, l := range v.GetLayers() {
		if l.GetRaidLevel() == "" {
			continue
		}
		s := l.GetRaidLevel()
		if l.GetRaidDisks() > 0 {
			s += fmt.Sprintf("x%d", l.GetRaidDisks())
		}
		return s
	}
	return "-"
}

// splitSizes names the split columns' I/O sizes, their vocab.IOSizeKey
// upper-cased: "8K/64K".
func splitSizes() string {
	var s []string
	for _, n := range vocab.IOSizes() {
		s = append(s, strings.ToUpper(vocab.IOSizeKey(n)))
	}
	return strings.Join(s, "/")
}

// splitCell writes a split figure for each of vocab.IOSizes; "-" when none was computed (no stripe unit or offset known).
func splitCell(sf map[uint32]float64) string {
	if len(sf) == 0 {
		return "-"
	}
	var s []string
	for _, n := range vocab.IOSizes() {
		s = append(s, percent(sf[n]))
	}
	return strings.Join(s, "/")
}

func percent(x float64) string {
	s := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.1f", x*100), "0"), ".")
	return s + "%"
}

func worst(a *plumblinev1.Alignment) string {
	var best *plumblinev1.Finding
	for _, f := range a.GetFindings() {
		if best == nil || vocab.SeverityRank(f.GetSeverity()) > vocab.SeverityRank(best.GetSeverity()) {
			best = f
		}
	}
	if best == nil {
		return "-"
	}
	return best.GetSeverity() + " " + best.GetRule()
}
