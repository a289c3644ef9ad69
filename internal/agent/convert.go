package agent

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// ProbeResultToProto converts one probe run of the volume at mountPoint to
// its wire form.
func ProbeResultToProto(mountPoint string, r probe.Result) *plumblinev1.ProbeResult {
	p := &plumblinev1.ProbeResult{
		MountPoint:         mountPoint,
		Device:             r.Device,
		Kind:               string(r.Kind),
		BlockSizeBytes:     uint32(max(r.BlockSize, 0)),
		QueueDepth:         uint32(max(r.QueueDepth, 0)),
		Sync:               string(r.Sync),
		Ops:                uint64(max(r.Ops, 0)),
		Errors:             uint64(max(r.Errors, 0)),
		Bytes:              uint64(max(r.Bytes, 0)),
		Duration:           durationpb.New(time.Duration(r.Duration * float64(time.Second))),
		CacheBypass:        r.CacheBypass,
		StoppedReason:      r.StoppedReason,
		Skipped:            r.Skipped,
		Latency:            wire.HistogramToProto(r.Histogram),
		ProbeFile:          r.File,
		ProbeFileSizeBytes: uint64(max(r.FileSize, 0)),
		OpsBudget:          uint64(max(r.OpsBudget, 0)),
		IopsCap:            r.IOPSCap,
		BusyGuard:          r.BusyGuard,
		BusyPercent:        r.BusyPercent,
		FirstError:         r.FirstError,
		Failure:            r.Failure,
		StripeScan:         r.StripeScan.Proto(),
	}
	if !r.Kind.Spec().Synced {
		p.Sync = ""
	}
	if !r.StartedAt.IsZero() {
		p.StartedAt = timestamppb.New(r.StartedAt)
	}
	if a := r.BusyIO; a != nil && a.Window > 0 {
		p.BusyIo = &plumblinev1.DeviceActivity{Window: durationpb.New(a.Window), Ios: a.IOs, Sectors: a.Sectors,
			IoTicks: durationpb.New(a.IOTicks), TimeInQueue: durationpb.New(a.TimeInQueue)}
	}
	return p
}

// notRun is the result reported for a run that never started its I/O:
// Run's error (reason from probe.FailureReason) or a lock timeout. It
// keeps what Run already knew (device, busy guard) and takes the rest from
// the options.
func notRun(o probe.Options, partial probe.Result, reason string, err error) probe.Result {
	r := partial
	r.Kind, r.BlockSize, r.QueueDepth, r.Sync = o.Kind, o.BlockSize, o.QueueDepth, o.Sync
	if o.Kind.Spec().Synced {
		r.QueueDepth = 1
		if r.Sync == "" {
			r.Sync = probe.SyncDsync
		}
	}
	r.FileSize, r.OpsBudget, r.IOPSCap = o.FileSize, o.Ops, o.IOPS
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now().UTC()
	}
	if r.BusyGuard == "" {
		r.BusyGuard = "off"
	}
	r.Ops, r.Errors, r.Bytes, r.Duration, r.IOPS, r.Throughput, r.Histogram = 0, 0, 0, 0, 0, 0, nil
	r.Skipped, r.StoppedReason, r.Failure = true, reason, failureText(err.Error())
	return r
}

// failureText makes an error message fit ProbeResult.failure: control
// characters replaced, valid UTF-8, at most probe.MaxFailureBytes.
func failureText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) <= probe.MaxFailureBytes {
		return s
	}
	cut := probe.MaxFailureBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
