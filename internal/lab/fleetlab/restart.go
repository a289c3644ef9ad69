//go:build linux

package fleetlab

import "context"

// RestartAgent stops the agent and starts it again with extra appended to
// its configuration (as Plan.BeforeAgent's), with or without the probes:
// a bench comparing the agent's cost with and without a piece of work.
func (s *Stack) RestartAgent(ctx context.Context, extra string, probes bool) error {
	s.procs.Stop("agent")
	s.noProbes = !probes
	return s.startAgent(ctx, extra)
}

// Pid is the process id of the stack's process of that name (server,
// agent, prometheus); 0 when it is not running.
func (s *Stack) Pid(name string) int {
	if p := s.procs.Running(name); p != nil {
		return p.Pid()
	}
	return 0
}
