package ingest

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	"google.golang.org/protobuf/proto"
)

// convertProbe checks a probe result from an agent and converts it to
// the store's row.
func convertProbe(p *plumblinev1.ProbeResult, now time.Time, lim Limits) (*store.ProbeResult, error) {
	if err := checkMountPoint(p.GetMountPoint()); err != nil {
		return nil, err
	}
	if d := p.GetDevice(); !deviceName(d) {
		return nil, fmt.Errorf("device %q: want a kernel device name (sdb, dm-3, md0)", d)
	}
	if err := checkProbeShape(p); err != nil {
		return nil, err
	}
	if err := checkProbeOutcome(p); err != nil {
		return nil, err
	}
	var dur time.Duration
	if d := p.GetDuration(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fmt.Errorf("duration: %w", err)
		}
		dur = d.AsDuration()
		if dur < 0 || dur > maxProbeDuration {
			return nil, fmt.Errorf("duration %s: want 0 to %s", dur, maxProbeDuration)
		}
	}
	started, err := checkTime(p.GetStartedAt(), "started_at", now, lim)
	if err != nil {
		return nil, err
	}
	histBytes, err := checkLatency(p)
	if err != nil {
		return nil, err
	}
	if err := checkProbeGuards(p); err != nil {
		return nil, err
	}
	scan, err := checkStripeScan(p)
	if err != nil {
		return nil, err
	}
	arrays, err := checkArrayActivity(p)
	if err != nil {
		return nil, err
	}
	busyIO, err := checkBusyIO(p)
	if err != nil {
		return nil, err
	}
	return &store.ProbeResult{
		MountPoint:     p.GetMountPoint(),
		Device:         p.GetDevice(),
		Kind:           p.GetKind(),
		BlockSizeBytes: p.GetBlockSizeBytes(),
		QueueDepth:     p.GetQueueDepth(),
		StartedAt:      started,
		Duration:       dur,
		Ops:            p.GetOps(),
		Errors:         p.GetErrors(),
		Bytes:          p.GetBytes(),
		Skipped:        p.GetSkipped(),
		StoppedReason:  p.GetStoppedReason(),
		Failure:        p.GetFailure(),
		Histogram:      histBytes,
		IOPSCap:        p.GetIopsCap(),
		StripeScan:     scan,
		ArrayActivity:  arrays,
		BusyIO:         busyIO,
	}, nil
}

// deviceName reports whether d can be a device's name as agents report
// it (sdb, md0, dm-3, PhysicalDrive1; empty when unknown): no path
// separator, space or control character.
func deviceName(d string) bool {
	return !strings.ContainsFunc(d, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) })
}

// checkProbeShape checks what the run was asked to do: its kind, block
// size, queue depth and sync mode.
func checkProbeShape(p *plumblinev1.ProbeResult) error {
	kind := p.GetKind()
	spec, ok := vocab.LookupProbeKind(vocab.ProbeKind(kind))
	if !ok {
		return fmt.Errorf("kind %q: want one of %s", kind, vocab.ProbeKindList())
	}
	bs := uint64(p.GetBlockSizeBytes())
	if lo, hi := spec.BlockSizes(); !powerOfTwo(bs) || bs < lo || bs > hi {
		return fmt.Errorf("block_size_bytes %d: want a power of two from %d to %d for %s", bs, lo, hi, kind)
	}
	qd := p.GetQueueDepth()
	switch maxQD := uint32(spec.QueueDepthLimit()); {
	case spec.Synced && qd != 1:
		return fmt.Errorf("queue_depth %d: want 1 for %s", qd, kind)
	case qd < 1 || qd > maxQD:
		return fmt.Errorf("queue_depth %d: want 1 to %d for %s", qd, maxQD, kind)
	}
	if ops, budget := p.GetOps(), spec.OpsLimit(); ops > budget {
		return fmt.Errorf("ops %d: want at most %d for %s", ops, budget, kind)
	}
	switch s := p.GetSync(); {
	case spec.Synced && !slices.Contains(vocab.SyncModeNames(), s):
		return fmt.Errorf("sync %q: want one of %s for %s", s, strings.Join(vocab.SyncModeNames(), ", "), kind)
	case !spec.Synced && s != "":
		return fmt.Errorf("sync %q: want empty for %s", s, kind)
	}
	return nil
}

// checkProbeOutcome checks how the run ended: its stop reason, counts
// and failure message agree with each other.
func checkProbeOutcome(p *plumblinev1.ProbeResult) error {
	if r := p.GetStoppedReason(); r != "" && !slices.Contains(vocab.StopReasons(), r) {
		return fmt.Errorf("stopped_reason %q: want empty or one of %s", r, strings.Join(vocab.StopReasons(), ", "))
	}
	ops, errs, bs := p.GetOps(), p.GetErrors(), uint64(p.GetBlockSizeBytes())
	if ops > vocab.MaxOps || errs > vocab.MaxOps {
		return fmt.Errorf("ops %d, errors %d: want at most %d each", ops, errs, vocab.MaxOps)
	}
	if b := p.GetBytes(); b > ops*bs {
		return fmt.Errorf("bytes %d: more than ops × block_size_bytes (%d × %d)", b, ops, bs)
	}
	if p.GetSkipped() && ops != 0 {
		return fmt.Errorf("skipped with ops %d: a skipped run has no operations", ops)
	}
	notRun := vocab.IsNotRun(p.GetStoppedReason())
	if notRun && (!p.GetSkipped() || ops != 0 || errs != 0) {
		return fmt.Errorf("stopped_reason %s with ops %d, errors %d, skipped %v: a run that never started has no operations and is skipped", p.GetStoppedReason(), ops, errs, p.GetSkipped())
	}
	failure := p.GetFailure()
	switch {
	case failure != "" && !notRun:
		return fmt.Errorf("failure set with stopped_reason %q: want it only with %s", p.GetStoppedReason(), strings.Join(vocab.NotRunReasons(), ", "))
	case len(failure) > vocab.MaxFailureBytes:
		return fmt.Errorf("failure: %d bytes, want at most %d", len(failure), vocab.MaxFailureBytes)
	case !utf8.ValidString(failure) || strings.ContainsFunc(failure, unicode.IsControl):
		return fmt.Errorf("failure %q: want UTF-8 text without control characters", failure)
	}
	return nil
}

// checkLatency checks the run's latency histogram against its ops and
// queue depth and returns it serialised for the store.
func checkLatency(p *plumblinev1.ProbeResult) ([]byte, error) {
	hist, err := wire.HistogramFromProto(p.GetLatency())
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	if ops := p.GetOps(); hist.Count() != ops {
		return nil, fmt.Errorf("latency: %d observations for %d ops: want one per completed op", hist.Count(), ops)
	}
	// No op outlasts the longest run, and no more than queue_depth ops
	// are ever in flight: that bounds the sum of a run's latencies, so
	// the server's merged histograms stay far from overflowing.
	if mx := hist.Max(); mx > maxProbeDuration {
		return nil, fmt.Errorf("latency: max %s: want at most %s", mx, maxProbeDuration)
	}
	qd := p.GetQueueDepth()
	if hi, lo := bits.Mul64(uint64(qd), uint64(maxProbeDuration)); hi != 0 || uint64(hist.Sum()) > lo {
		return nil, fmt.Errorf("latency: sum %s: more than queue_depth %d × %s", hist.Sum(), qd, maxProbeDuration)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p.GetLatency())
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	return b, nil
}

// checkProbeGuards checks the run's rate cap and the busy guard's report.
func checkProbeGuards(p *plumblinev1.ProbeResult) error {
	if c := p.GetIopsCap(); !(c >= 0) || math.IsInf(c, 0) {
		return fmt.Errorf("iops_cap %v: want 0 (uncapped) or more", c)
	}
	if bp := p.GetBusyPercent(); bp < 0 || bp > 100 {
		return fmt.Errorf("busy_percent %v: want 0 to 100", bp)
	}
	if g := p.GetBusyGuard(); g != "" && g != "on" && g != "off" && !strings.HasPrefix(g, "unavailable") {
		return fmt.Errorf("busy_guard %q: want on, off or \"unavailable: why\"", g)
	}
	return nil
}
