package probe

import (
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Placement is where the probe file's device offsets (FIEMAP's, retrieval
// pointers') lie on the device whose stripe a stripe-scan measures: the
// partition start, LVM and dm offsets and md data offset discovery found
// between the file system and the striped device (or the disk, when no
// striped layer is visible: hardware RAID, a SAN LUN).
type Placement struct {
	// Offset of the file system's device on Device, in bytes.
	Offset int64 `json:"offset_bytes"`
	// Known: Offset was read. When an offset on the way is unknown the
	// scan measures relative to the file system's own device, and says so.
	Known bool `json:"known"`
	// Device is the device the offsets are on (md0, sdb, PhysicalDrive1);
	// Basis says what it is ("striped device", "disk", "file system device").
	Device string `json:"device,omitempty"`
	Basis  string `json:"basis"`
	// Why is the reason an offset is unknown, from discovery.
	Why string `json:"why,omitempty"`
}

// StripeScanResult is a stripe-scan run's answer: the inference (inferred
// unit or none, confidence, per-candidate effect sizes with intervals, the
// measured straddle cost) and where the reads landed.
type StripeScanResult struct {
	stripescan.Inference
	Placement Placement `json:"placement"`
	// Extents is how many runs the probe file has on its device.
	Extents int `json:"extents"`
	// Placed is how many reads the scan placed; the run's ops say how many
	// completed (a stopped run is inferred from what it measured).
	Placed int `json:"placed"`
	// Measured is the completed reads per class: inside first, then each
	// candidate's straddles.
	Measured []int `json:"measured_per_class"`
	// FreshFile: this run wrote the probe file just before it measured,
	// so no unit is inferred from it (withholdFresh).
	FreshFile bool `json:"fresh_file,omitempty"`
}

// withholdFresh keeps the measurement of a run that wrote its probe file
// just before measuring but infers nothing from it, as a precaution: caches
// below (a controller's write-back cache, the host of a virtual disk) may
// still hold the fresh data and serve it in their own units. (On the lab's
// ssd preset first runs showed straddle costs growing with the unit, +740 µs
// at 512 KiB and +860 µs at 1 MiB; a later run once did too, which the
// uneven-cost check refuses.)
func (s *StripeScanResult) withholdFresh() {
	s.FreshFile = true
	if s.Unit != 0 {
		s.Reason = fmt.Sprintf("this run wrote the probe file just before measuring (it would have inferred %d bytes): caches below may still hold the fresh data, so nothing is inferred; run again", s.Unit)
	} else {
		s.Reason = "this run wrote the probe file just before measuring: caches below may still hold the fresh data, so nothing is inferred; run again (" + s.Reason + ")"
	}
	s.Unit, s.Confidence, s.StraddleCost, s.StraddleCostLow, s.StraddleCostHigh = 0, 0, 0, 0, 0
}

// scanPlacement is pl as a result reports it: with an unknown offset the
// reads are placed relative to the file system's own device.
func scanPlacement(pl Placement) Placement {
	if !pl.Known {
		pl.Offset = 0
		pl.Basis = align.BasisFileSystemDevice
	}
	return pl
}

// validateStripeScan checks the options a stripe-scan fixes: 8 KiB reads,
// one at a time (timing at queue depth 1 sees the split, not the queue),
// at most stripescan.MaxOps of them.
func (o *Options) validateStripeScan() error {
	switch {
	case o.BlockSize != stripescan.ReadSize:
		return fmt.Errorf("%w: stripe-scan reads are %d bytes: --block-size %d", ErrInvalid, stripescan.ReadSize, o.BlockSize)
	case o.QueueDepth > 1:
		return fmt.Errorf("%w: stripe-scan runs at queue depth 1: --qd %d", ErrInvalid, o.QueueDepth)
	case o.Ops > stripescan.MaxOps:
		return fmt.Errorf("%w: stripe-scan ops %d: want at most %d", ErrInvalid, o.Ops, stripescan.MaxOps)
	case o.FileSize < vocab.StripeScanMinFileSize:
		return fmt.Errorf("%w: stripe-scan needs a probe file of at least 16MiB (straddles of 1 MiB units): --file-size %d", ErrInvalid, o.FileSize)
	}
	return nil
}

// scanAlign is the file offset alignment of a stripe-scan read: 4 KiB,
// which every O_DIRECT and FILE_FLAG_NO_BUFFERING file accepts.
const scanAlign = 4096

// scanResult turns the reads and their latencies (negative: not
// completed) into the answer.
func scanResult(pl Placement, extents int, reads []stripescan.Read, lat []time.Duration) *StripeScanResult {
	m := len(stripescan.Candidates())
	straddles := make([][]float64, m)
	var inside []float64
	measured := make([]int, m+1)
	for i, r := range reads {
		if i >= len(lat) || lat[i] < 0 {
			continue
		}
		s := lat[i].Seconds()
		if r.Class == stripescan.Inside {
			inside = append(inside, s)
			measured[0]++
			continue
		}
		straddles[r.Class] = append(straddles[r.Class], s)
		measured[r.Class+1]++
	}
	return &StripeScanResult{
		Inference: stripescan.Infer(inside, straddles, 0),
		Placement: pl,
		Extents:   extents,
		Placed:    len(reads),
		Measured:  measured,
	}
}
