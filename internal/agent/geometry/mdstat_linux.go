package geometry

import (
	"fmt"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"github.com/prometheus/procfs"
	"google.golang.org/protobuf/proto"
)

// maxMDStatBytes bounds the /proc/mdstat read: a few lines per array.
const maxMDStatBytes = 1 << 20

// mdstatHealth is an md array's health from /proc/mdstat, for a kernel
// (or a restricted sysfs) without md/array_state and dev-*/state. It is
// coarser than sysfs: no slots, errors, bad blocks or mismatch count, and
// a member's in_sync is not stated. procfs parses the file; the bounded
// read before it records it for captures and refuses a huge one.
func (d *discoverer) mdstatHealth(name string) (*plumblinev1.RaidHealth, error) {
	p := d.proc.Path("mdstat")
	b, err := d.readFileLimit(p, maxMDStatBytes)
	if err != nil {
		return nil, err
	}
	stats, err := parseMDStatFS(string(d.proc))
	if err != nil {
		return nil, err
	}
	for _, s := range stats {
		if s.Name == name {
			return mdstatToHealth(s, mdstatReadOnly(b, name)), nil
		}
	}
	return nil, fmt.Errorf("lists no %s", name)
}

// parseMDStatFS is procfs' /proc/mdstat parser under procRoot. procfs
// panics on some malformed files (a one-character word on the
// Personalities line); that is an error here.
func parseMDStatFS(procRoot string) (stats []procfs.MDStat, err error) {
	defer func() {
		if r := recover(); r != nil {
			stats, err = nil, fmt.Errorf("parse mdstat: %v", r)
		}
	}()
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	return fs.MDStat()
}

// mdstatReadOnly reads what procfs leaves out of an array's line:
// "md0 : active (auto-read-only) raid1 ..." is read-auto, "(read-only)"
// readonly; "" otherwise.
func mdstatReadOnly(b []byte, name string) string {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != name || f[1] != ":" {
			continue
		}
		switch f[3] {
		case "(auto-read-only)":
			return vocab.MDReadAuto
		case "(read-only)":
			return vocab.MDReadonly
		}
	}
	return ""
}

// mdstatToHealth maps procfs' reading onto md's words. procfs folds the
// running sync action into the activity state.
func mdstatToHealth(s procfs.MDStat, readOnly string) *plumblinev1.RaidHealth {
	h := &plumblinev1.RaidHealth{ArrayState: vocab.MDActive}
	action := map[string]string{"recovering": vocab.MDRecover, "resyncing": vocab.MDResync, "checking": vocab.MDCheck, "reshaping": vocab.MDReshape}
	switch a, ok := action[s.ActivityState]; {
	case s.ActivityState == vocab.MDInactive:
		h.ArrayState = vocab.MDInactive
	case ok:
		h.SyncAction = a
		if s.BlocksToBeSynced > 0 && s.BlocksSynced >= 0 && s.BlocksSynced <= s.BlocksToBeSynced {
			// mdstat counts 1 KiB blocks.
			h.SyncCompletedSectors, h.SyncTotalSectors = uint64(s.BlocksSynced)*2, uint64(s.BlocksToBeSynced)*2
		}
		if s.BlocksSyncedSpeed > 0 && s.BlocksSyncedSpeed < 1<<40 {
			h.SyncSpeedBytesPerSecond = uint64(s.BlocksSyncedSpeed * 1024)
		}
	default:
		h.SyncAction = vocab.MDIdle
	}
	if readOnly != "" && h.ArrayState == vocab.MDActive {
		h.ArrayState = readOnly
	}
	if s.DisksTotal > 0 && s.DisksActive >= 0 && s.DisksActive <= s.DisksTotal && s.Type != "raid0" && s.Type != "linear" {
		h.Degraded = proto.Uint32(uint32(s.DisksTotal - s.DisksActive))
	}
	for i, c := range s.Devices {
		if i == maxMDMembers {
			break
		}
		m := &plumblinev1.RaidMember{Device: c.Name}
		for _, f := range [...]struct {
			on   bool
			word string
		}{{c.Faulty, vocab.MDFaulty}, {c.Spare, vocab.MDSpare}, {c.WriteMostly, vocab.MDWriteMostly}, {c.Journal, vocab.MDJournal}, {c.Replacement, vocab.MDReplacement}} {
			if f.on {
				m.State = append(m.State, f.word)
			}
		}
		h.Members = append(h.Members, m)
	}
	return h
}
