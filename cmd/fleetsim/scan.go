package main

import (
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// A simulated stripe-scan runs as the documented geometry schedule does:
// the kind's whole budget of 8 KiB reads at 100 IOPS (20 s).
const (
	scanOps     = vocab.StripeScanMaxOps
	scanIOPSCap = 100
)

// scanKey is a class of simulated scans: the medium and the array's true
// stripe unit (0: none, a mirror).
type scanKey struct {
	media Media
	unit  uint64
}

// scanSample is one pre-drawn scan: its latency histogram, duration and
// answer (placement left to the record).
type scanSample struct {
	hist     *plumblinev1.Histogram // shared, read only
	duration time.Duration
	scan     *plumblinev1.StripeScan // shared, read only: ScanRecord clones it
}

// trueUnit is the stripe unit a scan of the volume can find: none on a
// mirror, whose reads are served whole by one member.
func trueUnit(v *VolumeProfile) uint64 {
	if v.RAIDLevel == "raid1" {
		return 0
	}
	return v.StripeUnit
}

// SimulateScan is one stripe-scan of an array of medium m and stripe unit
// unit (0: none): reads placed as the engine places them
// (stripescan.Shares); an inside read, or a straddle of a unit below the
// stripe unit, is one member's read at the medium's random-read latency;
// a straddle of the stripe unit or a larger one is two members' reads and
// completes when the slower does (the split-I/O model, DESIGN.md §1).
// The engine's own inference (stripescan.Infer) answers.
func SimulateScan(r *rand.Rand, m Media, unit uint64) (probe.StripeScanResult, *histogram.Histogram, time.Duration) {
	lm := latencies[m][probe.RandomRead]
	var h histogram.Histogram
	var busy time.Duration
	member := func() float64 { return float64(lm.median) * math.Exp(lm.sigma*r.NormFloat64()) }
	read := func(split bool) float64 {
		d := member()
		if split {
			d = max(d, member())
		}
		busy += time.Duration(d)
		h.Observe(time.Duration(d))
		return d / float64(time.Second)
	}
	nIn, per := stripescan.Shares(scanOps)
	inside := make([]float64, nIn)
	for i := range inside {
		inside[i] = read(false)
	}
	straddles := make([][]float64, len(per))
	for c, u := range stripescan.Candidates() {
		straddles[c] = make([]float64, per[c])
		for i := range straddles[c] {
			straddles[c][i] = read(unit != 0 && uint64(u) >= unit)
		}
	}
	res := probe.StripeScanResult{Inference: stripescan.Infer(inside, straddles, 0), Placed: scanOps}
	return res, &h, max(busy, time.Duration(float64(scanOps)/scanIOPSCap*float64(time.Second)))
}

// scanVariants is how many scans are pre-drawn per class: each is an
// inference over 2,000 reads (about 10 ms).
const scanVariants = 4

// drawScans pre-draws scanVariants scans for every medium and stripe unit
// (and none).
func drawScans(seed uint64) map[scanKey][]scanSample {
	r := rand.New(rand.NewPCG(seed, 0x5ca7))
	out := map[scanKey][]scanSample{}
	for _, m := range mediaKinds {
		for _, u := range append([]uint64{0}, stripeUnits...) {
			key := scanKey{m, u}
			for range scanVariants {
				res, h, d := SimulateScan(r, m, u)
				out[key] = append(out[key], scanSample{hist: wire.HistogramToProto(h), duration: d, scan: res.Proto()})
			}
		}
	}
	return out
}

// ScanRecord is a stripe-scan result on hidden-stripe volume v, finished
// at now, as the agent would spool it: placed on the disk (the
// controller's logical drive) at the partition's known offset.
func (p *SamplePool) ScanRecord(r *rand.Rand, v *VolumeProfile, now time.Time) *plumblinev1.ProbeResult {
	vs := p.scans[scanKey{v.Media, trueUnit(v)}]
	s := vs[r.IntN(len(vs))]
	scan := proto.Clone(s.scan).(*plumblinev1.StripeScan)
	scan.PlacementDevice, scan.PlacementBasis = v.Device, align.BasisDisk
	scan.PlacementOffsetBytes, scan.PlacementOffsetKnown = v.Offset, true
	scan.Extents = uint32(1 + r.IntN(8))
	res := simulatedRun(r, v, scanOps, s.duration, s.hist, now)
	res.Kind = string(probe.StripeScan)
	res.BlockSizeBytes, res.QueueDepth = vocab.StripeScanBlockSize, 1
	res.Bytes = scanOps * vocab.StripeScanBlockSize
	res.IopsCap = scanIOPSCap
	res.StripeScan = scan
	return res
}
