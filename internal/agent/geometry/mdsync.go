package geometry

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// MDSync is an md array's sync action as md/sync_action, sync_completed
// and sync_speed state it at one moment: what a probe run records of the
// arrays under its volume at its start and end (ProbeResult.array_activity).
type MDSync struct {
	// Device is the array's kernel name (md0).
	Device string
	// Action is md/sync_action: idle, frozen, or a running action
	// (resync, recover, reshape, check, repair).
	Action string
	// DoneSectors and TotalSectors are md/sync_completed (512-byte
	// sectors); both 0 when md said none or delayed.
	DoneSectors, TotalSectors uint64
	// SpeedBytesPerSecond is md/sync_speed; 0 when md said none.
	SpeedBytesPerSecond uint64
}

// Running says whether an action runs: neither idle nor frozen.
func (s MDSync) Running() bool {
	return s.Action != "" && s.Action != vocab.MDIdle && s.Action != vocab.MDFrozen
}

// Proto is the run's mark for the array.
func (s MDSync) Proto() *plumblinev1.ArrayActivity {
	return &plumblinev1.ArrayActivity{Device: s.Device, SyncAction: s.Action, SyncCompletedSectors: s.DoneSectors,
		SyncTotalSectors: s.TotalSectors, SyncSpeedBytesPerSecond: s.SpeedBytesPerSecond}
}

// MDArrays are the md arrays among a volume's layers (kind raid, a kernel
// name md*) that can run a sync action (not raid0 or linear: md offers
// them no sync_action), each once, in layer order.
func MDArrays(v *plumblinev1.Volume) []string {
	var out []string
	for _, l := range v.GetLayers() {
		dev := l.GetDevice()
		if l.GetKind() != KindRAID || !strings.HasPrefix(dev, "md") || strings.ContainsAny(dev, `/\`) {
			continue
		}
		if lv := l.GetRaidLevel(); lv == "raid0" || lv == "linear" {
			continue
		}
		if !containsString(out, dev) {
			out = append(out, dev)
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// ReadMDSync reads the sync attributes of md array device under the sysfs
// root sysfsRoot (block/<device>/md/, else class/block/<device>/md/), with
// the parsers discovery uses. sync_action must be readable; a
// sync_completed or sync_speed md does not offer (or writes oddly) leaves
// its figures 0.
func ReadMDSync(sysfsRoot, device string) (MDSync, error) {
	s := MDSync{Device: device}
	if device == "" || strings.ContainsAny(device, `/\`) || device == "." || device == ".." {
		return s, fmt.Errorf("md array name %q", device)
	}
	sys := root(filepath.Clean(sysfsRoot))
	md := sys.Sub("block", device, "md")
	b, err := readSmall(md.Path("sync_action"))
	if errors.Is(err, fs.ErrNotExist) {
		md = sys.Sub("class", "block", device, "md")
		b, err = readSmall(md.Path("sync_action"))
	}
	if err == nil {
		s.Action, err = parseMDWord(b)
	}
	if err != nil {
		return s, fmt.Errorf("%s sync_action: %w", device, err)
	}
	if b, err := readSmall(md.Path("sync_completed")); err == nil {
		if done, total, _, err := parseMDSyncCompleted(b); err == nil {
			s.DoneSectors, s.TotalSectors = done, total
		}
	}
	if b, err := readSmall(md.Path("sync_speed")); err == nil {
		if bps, err := parseMDSyncSpeed(b); err == nil {
			s.SpeedBytesPerSecond = bps
		}
	}
	return s, nil
}

// readSmall reads a single-value sysfs file, at most maxSysfsValue bytes.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSysfsValue+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSysfsValue {
		return nil, errors.New("longer than a sysfs value")
	}
	return b, nil
}
