package exporter

import "github.com/plumbline/plumbline/internal/server/store"

// arraySync appends the sync progress and speed series of array r under
// v: only while an action runs (the series budget: two series per array
// for the length of a resync, recovery, reshape or check), each only when
// md stated it.
func (c *Collector) arraySync(ss []*series, v *store.JudgedVolume, r store.RAIDArray) []*series {
	s := r.Sync
	if s.Action == "" {
		return ss
	}
	if s.TotalSectors > 0 {
		ss = append(ss, c.series(famVolRAIDSyncProgress, float64(s.DoneSectors)/float64(s.TotalSectors),
			v.AgentID, v.Hostname, v.MountPoint, r.Device, s.Action))
	}
	if s.SpeedBytesPerSecond > 0 {
		ss = append(ss, c.series(famVolRAIDSyncSpeed, float64(s.SpeedBytesPerSecond), v.AgentID, v.Hostname, v.MountPoint, r.Device, s.Action))
	}
	return ss
}
