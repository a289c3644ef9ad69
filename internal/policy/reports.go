package policy

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Report is what one agent last told this server about its policy.
type Report struct {
	AgentID  string            `json:"agent_id"`
	Hostname string            `json:"hostname"`
	Labels   map[string]string `json:"labels"`
	// Effective is the agent's effective configuration (YAML) and
	// AppliedDigest the central policy's digest it runs with (hex).
	Effective     string    `json:"effective_config,omitempty"`
	AppliedDigest string    `json:"applied_digest,omitempty"`
	At            time.Time `json:"reported_at"`
}

// maxReports bounds Reports: with mutual TLS an agent can only write its
// own entry, so this is the fleet's size with a wide margin.
const maxReports = 200_000

// Reports holds the last Report of each agent that spoke to this server
// (in memory: a restarted server learns them again at the agents' next
// Hello and WatchPolicy).
type Reports struct {
	mu sync.Mutex
	m  map[string]Report
}

// NewReports returns an empty Reports.
func NewReports() *Reports { return &Reports{m: map[string]Report{}} }

// Put records r, keeping the effective configuration of the previous
// report when r has none (a Hello).
func (rs *Reports) Put(r Report) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old, ok := rs.m[r.AgentID]
	if ok && r.Effective == "" {
		r.Effective, r.AppliedDigest = old.Effective, old.AppliedDigest
	}
	if !ok && len(rs.m) >= maxReports {
		var oldest string
		for id, o := range rs.m {
			if oldest == "" || o.At.Before(rs.m[oldest].At) {
				oldest = id
			}
		}
		delete(rs.m, oldest)
	}
	rs.m[r.AgentID] = r
}

// ForHost returns the reports of the agents whose host name or agent id
// is host, by agent id.
func (rs *Reports) ForHost(host string) []Report {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []Report
	for _, r := range rs.m {
		if r.Hostname == host || r.AgentID == host {
			r.Labels = maps.Clone(r.Labels)
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Report) int {
		if a.AgentID < b.AgentID {
			return -1
		}
		if a.AgentID > b.AgentID {
			return 1
		}
		return 0
	})
	return out
}
