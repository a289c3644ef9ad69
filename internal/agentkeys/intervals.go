package agentkeys

import "time"

// The member I/O interval (intervals.member_io): how often the agent
// samples /proc/diskstats for the members of the md arrays, mirrors,
// striped LVs and multipath devices under its volumes. The agent's file
// and central policy share the bounds.
const (
	// DefaultMemberIOInterval: one read of one procfs file a minute. A
	// record holds only the groups that did I/O in the interval, ~40
	// bytes a member: a host with 2 busy 4-member arrays spools ~0.4 KiB
	// a minute, ~4 MiB a week.
	DefaultMemberIOInterval = time.Minute
	MinMemberIOInterval     = 10 * time.Second
	MaxMemberIOInterval     = time.Hour
)
