package agent

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/probe"
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
	}
	if r.Kind != probe.LogWrite {
		p.Sync = ""
	}
	if !r.StartedAt.IsZero() {
		p.StartedAt = timestamppb.New(r.StartedAt)
	}
	return p
}
