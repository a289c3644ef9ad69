package probe

import (
	"fmt"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// diskstatsSampler reads io_ticks of one device from <procRoot>/diskstats.
type diskstatsSampler struct {
	fs           blockdevice.FS
	major, minor uint32
	name         string
}

var (
	_ utilSampler     = (*diskstatsSampler)(nil)
	_ activitySampler = (*diskstatsSampler)(nil)
)

// newDiskstatsSampler finds the /proc/diskstats line of the device that
// holds a file system (st_dev). It returns nil and the reason when there is
// none: btrfs, overlay, NFS and tmpfs have anonymous device numbers with no
// diskstats line, so the busy guard cannot work there.
func newDiskstatsSampler(procRoot, sysRoot string, dev uint64) (*diskstatsSampler, string) {
	major, minor := unix.Major(dev), unix.Minor(dev)
	fs, err := blockdevice.NewFS(procRoot, sysRoot)
	if err != nil {
		return nil, fmt.Sprintf("unavailable: %v", err)
	}
	s := &diskstatsSampler{fs: fs, major: major, minor: minor}
	name, err := s.lookup()
	if err != nil {
		return nil, fmt.Sprintf("unavailable: %v", err)
	}
	s.name = name
	return s, "on"
}

func (s *diskstatsSampler) lookup() (string, error) {
	stats, err := s.fs.ProcDiskstats()
	if err != nil {
		return "", fmt.Errorf("read diskstats: %w", err)
	}
	for _, d := range stats {
		if d.MajorNumber == s.major && d.MinorNumber == s.minor {
			return d.DeviceName, nil
		}
	}
	return "", fmt.Errorf("no diskstats line for device %d:%d", s.major, s.minor)
}

func (s *diskstatsSampler) ioTicks() (time.Duration, error) {
	c, err := s.counters()
	return c.ticks, err
}

// counters reads the device's line of diskstats: completed reads and
// writes, their sectors, io_ticks and time_in_queue.
func (s *diskstatsSampler) counters() (diskCounters, error) {
	stats, err := s.fs.ProcDiskstats()
	if err != nil {
		return diskCounters{}, fmt.Errorf("read diskstats: %w", err)
	}
	for _, d := range stats {
		if d.MajorNumber == s.major && d.MinorNumber == s.minor {
			return diskCounters{ios: d.ReadIOs + d.WriteIOs, sectors: d.ReadSectors + d.WriteSectors,
				ticks: time.Duration(d.IOsTotalTicks) * time.Millisecond, queue: time.Duration(d.WeightedIOTicks) * time.Millisecond}, nil
		}
	}
	return diskCounters{}, fmt.Errorf("device %d:%d (%s) left diskstats", s.major, s.minor, s.name)
}

// noBusyGuard is empty: Linux has a busy guard (Run's checkBusy).
const noBusyGuard = ""

// newBusySampler is the busy guard's sampler of the device under d, with
// the device's diskstats name and the guard's status; nil where there is
// none (the status says why).
func newBusySampler(o Options, d *probeDir) (utilSampler, string, string) {
	s, status := newDiskstatsSampler(o.ProcRoot, o.SysRoot, d.dev)
	if s == nil {
		return nil, "", status
	}
	return s, s.name, status
}
