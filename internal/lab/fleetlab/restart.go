//go:build linux

package fleetlab

import (
	"context"
	"os"
	"time"
)

// RestartAgent stops the agent and starts it again with extra appended to
// its configuration (as Plan.BeforeAgent's), with or without the probes:
// a bench comparing the agent's cost with and without a piece of work.
func (s *Stack) RestartAgent(ctx context.Context, extra string, probes bool) error {
	s.mu.Lock()
	var agent *proc
	kept := s.procs[:0]
	for _, p := range s.procs {
		if p.name == "agent" {
			agent = p
			continue
		}
		kept = append(kept, p)
	}
	s.procs = kept
	s.noProbes = !probes
	s.mu.Unlock()
	if agent != nil {
		agent.cmd.Process.Signal(os.Interrupt)
		select {
		case <-agent.done:
		case <-time.After(15 * time.Second):
			agent.cmd.Process.Kill()
			<-agent.done
		}
	}
	return s.startAgent(ctx, extra)
}

// Pid is the process id of the stack's process of that name (server,
// agent, prometheus); 0 when it is not running.
func (s *Stack) Pid(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.name == name && p.cmd.Process != nil {
			select {
			case <-p.done:
			default:
				return p.cmd.Process.Pid
			}
		}
	}
	return 0
}
