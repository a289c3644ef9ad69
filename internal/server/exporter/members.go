package exporter

import "context"

// buildSlowMembers sets the slow members' family from the sibling judge's
// states (internal/server/members): one series per member it names,
// fleet-wide (shard 0), the host name from the agents read this scrape.
func (c *Collector) buildSlowMembers(ctx context.Context) error {
	slow, err := c.st.ListSlowMembers(ctx)
	if err != nil {
		return err
	}
	hosts := make(map[string]string, len(c.hosts))
	for _, a := range c.hosts {
		hosts[a.ID] = a.Hostname
	}
	ss := make([]*series, 0, len(slow))
	for _, m := range slow {
		byID := ""
		if len(m.ByID) > 0 {
			byID = m.ByID[0]
		}
		ss = append(ss, c.series(famRAIDMemberSlow, m.Ratio, m.AgentID, hosts[m.AgentID], m.GroupDevice, m.GroupKind, m.Device, byID, m.Serial, m.Direction))
	}
	c.set(famRAIDMemberSlow, ss)
	return nil
}
