package baseline

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Rebuilding is a volume whose md array rewrites redundancy it lacks or is
// changing (resync, recover, reshape: vocab.MDSyncRebuilds): its probe
// runs are slower until that ends, and they are kept out of the volume's
// history so that they do not teach it a new normal. A check or repair
// (a scrub) is judged as usual.
const Rebuilding Status = "rebuilding"

// Rebuild is what a probe run's mark says of one rebuild under its volume.
type Rebuild struct {
	Device string // md0
	Action string // resync, recover, reshape
	// DoneSectors of TotalSectors (512 bytes each); TotalSectors 0: md did
	// not say (delayed, or a kernel without sync_completed).
	DoneSectors, TotalSectors uint64
	SpeedBytesPerSecond       uint64 // 0: md did not say
	// Since is the first run seen in this rebuild (zero: not known).
	Since time.Time
}

// IsRebuild says whether an md sync action rebuilds (vocab.MDSyncRebuilds).
func IsRebuild(action string) bool { return vocab.MDSyncRebuilds(action) }

// Progress is the share done, 0 to 1, and whether md said it.
func (r Rebuild) Progress() (float64, bool) {
	if r.TotalSectors == 0 {
		return 0, false
	}
	return float64(r.DoneSectors) / float64(r.TotalSectors), true
}

// Left is the time to finish at the current speed, and whether it can be
// said (progress and speed known).
func (r Rebuild) Left() (time.Duration, bool) {
	if r.TotalSectors == 0 || r.SpeedBytesPerSecond == 0 {
		return 0, false
	}
	s := float64(r.TotalSectors-r.DoneSectors) * 512 / float64(r.SpeedBytesPerSecond)
	if s > float64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(s * float64(time.Second)).Round(time.Minute), true
}

// String says it for the volume's state: "rebuilding, 43% done: md0
// recover at 50.0 MiB/s, about 2h10m0s left, since 2026-11-28T03:00:00Z".
func (r Rebuild) String() string {
	var b strings.Builder
	b.WriteString(string(Rebuilding))
	if p, ok := r.Progress(); ok {
		fmt.Fprintf(&b, ", %d%% done", int(math.Floor(p*100)))
	}
	fmt.Fprintf(&b, ": %s %s", r.Device, r.Action)
	if r.SpeedBytesPerSecond > 0 {
		fmt.Fprintf(&b, " at %.1f MiB/s", float64(r.SpeedBytesPerSecond)/(1<<20))
	}
	if d, ok := r.Left(); ok {
		fmt.Fprintf(&b, ", about %s left", d)
	}
	if !r.Since.IsZero() {
		fmt.Fprintf(&b, ", since %s", r.Since.UTC().Format(time.RFC3339))
	}
	b.WriteString("; its probe runs are kept out of the volume's history")
	return b.String()
}
