package ingest

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// judgeMeasured judges the volumes of the batch's snapshots again where
// ValidateReport's judgement (the shipped rules, no measurement) is not
// the server's: under the rules in force when they are not the shipped
// ones, and with the measured stripe of the agent's stored stripe-scan
// runs, so that a new snapshot keeps what the geometry probe measured.
// (A run in this same batch reaches its volume after the batch:
// rejudgeScanned.)
func (s *Service) judgeMeasured(ctx context.Context, agent string, b *Batch) error {
	if !slices.ContainsFunc(b.Records, func(r store.Record) bool { return len(r.Volumes) > 0 }) {
		return nil
	}
	rules := s.judge.Rules()
	shipped := rules.Version() == Rules{}.Version()
	runs, err := s.store.StripeScanRuns(ctx, agent, "")
	if err != nil || (len(runs) == 0 && shipped) {
		return err
	}
	for i := range b.Records {
		vols := b.Records[i].Volumes
		for j, v := range vols {
			scans := runs[v.MountPoint]
			if len(scans) == 0 && shipped {
				continue
			}
			var pv plumblinev1.Volume
			err := proto.Unmarshal(v.Geometry, &pv)
			if err == nil {
				vols[j], err = judgeVolume(&pv, measuredStripe(scans), rules)
			}
			if err != nil { // judged once already: cannot fail on the same bytes
				return fmt.Errorf("volume %q under the rules in force: %w", v.MountPoint, err)
			}
		}
	}
	return nil
}

// rejudgeScanned brings the stripe-scan runs this batch stored to their
// volumes' verdicts. The runs are stored whatever happens here: a volume
// that fails to be judged again now is at the next snapshot of its agent,
// so a failure is logged, not returned.
func (s *Service) rejudgeScanned(ctx context.Context, agent string, b *Batch, res store.AppendResult) {
	var mounts []string
	for _, r := range b.Records {
		if r.Probe == nil || r.Probe.StripeScan == nil || !slices.Contains(res.Stored, r.Sequence) {
			continue
		}
		if !slices.Contains(mounts, r.Probe.MountPoint) {
			mounts = append(mounts, r.Probe.MountPoint)
		}
	}
	for _, mp := range mounts {
		changed, err := s.judge.Volume(ctx, agent, mp)
		if err != nil {
			s.opts.Logger.Warn("volume not judged again after its stripe-scan run; it will be at its next snapshot",
				"agent", agent, "mount_point", mp, "err", err)
			continue
		}
		if changed {
			s.opts.Logger.Info("volume judged again with its measured stripe", "agent", agent, "mount_point", mp)
		}
	}
}
