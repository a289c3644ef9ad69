package ingest

import (
	"fmt"
	"strings"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// maxSyncSpeed bounds md/sync_speed on the wire: 1 TiB/s, far above any
// array's.
const maxSyncSpeed = 1 << 40

// maxArrayName bounds an md array's kernel name (md127, md_d0): the
// kernel's disk names are at most 31 bytes.
const maxArrayName = 32

// checkArrayActivity checks a probe run's mark, the md arrays under its
// volume that ran a sync action at its start or end, and returns it for
// the store (nil: none): at most vocab.MaxArrayActivity arrays, each an md
// kernel name once, an action md writes (an unknown word is kept as
// written; idle and frozen are no action and are refused), progress within
// its total.
func checkArrayActivity(p *plumblinev1.ProbeResult) ([]store.ArrayActivity, error) {
	acts := p.GetArrayActivity()
	if len(acts) == 0 {
		return nil, nil
	}
	if len(acts) > vocab.MaxArrayActivity {
		return nil, fmt.Errorf("array_activity: %d arrays, want at most %d", len(acts), vocab.MaxArrayActivity)
	}
	out := make([]store.ArrayActivity, 0, len(acts))
	seen := map[string]bool{}
	for i, a := range acts {
		dev := a.GetDevice()
		if !strings.HasPrefix(dev, "md") || len(dev) > maxArrayName || !deviceName(dev) || seen[dev] {
			return nil, fmt.Errorf("array_activity[%d].device %q: want an md array's kernel name (md0), each once", i, dev)
		}
		seen[dev] = true
		act := a.GetSyncAction()
		if err := vocab.CheckMDWord(act); err != nil {
			return nil, fmt.Errorf("array_activity[%d].sync_action: %w", i, err)
		}
		if act == vocab.MDIdle || act == vocab.MDFrozen {
			return nil, fmt.Errorf("array_activity[%d].sync_action %q: want an action that runs (%s)", i, act, strings.Join(runningActions(), ", "))
		}
		done, total := a.GetSyncCompletedSectors(), a.GetSyncTotalSectors()
		if done > total {
			return nil, fmt.Errorf("array_activity[%d]: %d sectors done of %d", i, done, total)
		}
		if s := a.GetSyncSpeedBytesPerSecond(); s > maxSyncSpeed {
			return nil, fmt.Errorf("array_activity[%d].sync_speed_bytes_per_second %d: want at most %d", i, s, uint64(maxSyncSpeed))
		}
		out = append(out, store.ArrayActivity{Device: dev, Action: act, DoneSectors: done, TotalSectors: total,
			SpeedBytesPerSecond: a.GetSyncSpeedBytesPerSecond()})
	}
	return out, nil
}

// runningActions are md's sync actions that run.
func runningActions() []string {
	var out []string
	for _, a := range vocab.MDSyncActions() {
		if a != vocab.MDIdle && a != vocab.MDFrozen {
			out = append(out, a)
		}
	}
	return out
}
