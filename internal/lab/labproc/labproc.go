// Package labproc runs a lab's child processes as one group: each is
// started with its output (stdout and stderr) captured and bounded,
// watched until it exits, and all are stopped together, the last started
// first — a signal, then SIGKILL once a grace period has passed.
//
// fleetlab and the slow-member bench run the built server, agent and
// Prometheus this way. It is lab and bench code: neither binary links it.
package labproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultGrace is how long Close waits for a signalled process
	// before it kills it, when Group.Grace is zero.
	DefaultGrace = 15 * time.Second
	// DefaultLimit is how many bytes of a process's output are kept (the
	// last ones), when Group.Limit is zero.
	DefaultLimit = 1 << 20
	// TailLines is how many of its last output lines Proc.Err reports.
	TailLines = 20
)

// Group is a set of child processes started with Start and stopped with
// Close. Its zero value is ready to use: processes are asked to stop with
// os.Interrupt and killed after DefaultGrace. A Group must not be copied
// once used; its methods are safe for concurrent use.
type Group struct {
	// Signal asks a process to stop; nil is os.Interrupt (what the
	// server, the agent, Prometheus and the database loads all handle).
	Signal os.Signal
	// Grace is how long a process has to exit after Signal before it is
	// killed; zero is DefaultGrace.
	Grace time.Duration
	// Limit is how many bytes of each process's output are kept, the
	// last ones; zero is DefaultLimit.
	Limit int

	mu    sync.Mutex
	procs []*Proc
}

// Proc is one process of a Group.
type Proc struct {
	name string
	cmd  *exec.Cmd
	out  *output
	done chan struct{} // closed once Wait has returned and waitErr is set
	// waitErr is cmd.Wait's error, written before done is closed.
	waitErr error
}

// Start starts cmd as the group's process called name. Its stderr, and its
// stdout unless cmd.Stdout is already set, go to the process's kept
// output. A goroutine waits for it; Close (or Stop) stops it and waits.
func (g *Group) Start(name string, cmd *exec.Cmd) (*Proc, error) {
	limit := g.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	p := &Proc{name: name, cmd: cmd, out: &output{limit: limit}, done: make(chan struct{})}
	cmd.Stderr = p.out
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { // owned: Close and Stop wait for done
		defer close(p.done)
		p.waitErr = cmd.Wait()
	}()
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p, nil
}

// Exited returns the first process, in start order, that has stopped,
// or nil while every one runs. Its Err says how it ended and its last
// output lines.
func (g *Group) Exited() *Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		if p.exited() {
			return p
		}
	}
	return nil
}

// Running returns the first running process called name, or nil.
func (g *Group) Running(name string) *Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		if p.name == name && !p.exited() {
			return p
		}
	}
	return nil
}

// Logs returns every process's kept output, in start order, each under a
// "----- name -----" line.
func (g *Group) Logs() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, p := range g.procs {
		fmt.Fprintf(&b, "----- %s -----\n%s\n", p.name, p.out)
	}
	return b.String()
}

// Stop takes the processes called name out of the group and stops them,
// the last started first, as Close does.
func (g *Group) Stop(name string) {
	g.mu.Lock()
	var stop []*Proc
	kept := g.procs[:0]
	for _, p := range g.procs {
		if p.name == name {
			stop = append(stop, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(g.procs[len(kept):])
	g.procs = kept
	g.mu.Unlock()
	g.stop(stop)
}

// Close stops every process, the last started first: each gets Signal
// and, if it has not exited within Grace, SIGKILL; Close waits for it
// before it signals the next. The group is then empty (Logs returns
// nothing); calling Close again does nothing.
func (g *Group) Close() {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	g.stop(procs)
}

// stop stops procs in reverse order.
func (g *Group) stop(procs []*Proc) {
	sig, grace := g.Signal, g.Grace
	if sig == nil {
		sig = os.Interrupt
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(sig, grace)
	}
}

func (p *Proc) stop(sig os.Signal, grace time.Duration) {
	p.cmd.Process.Signal(sig) // an error: it has exited already
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Name is the name the process was started with.
func (p *Proc) Name() string { return p.name }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Output is the process's kept output so far: everything it wrote, or,
// past the group's Limit, a line counting the bytes dropped and then the
// last lines that fit.
func (p *Proc) Output() string { return p.out.String() }

// Err is nil while the process runs. Once it has exited, Err names it and
// says how it ended (wrapping exec.Cmd.Wait's error, an *exec.ExitError
// for a non-zero status or a signal) followed by its last TailLines
// output lines.
func (p *Proc) Err() error {
	if !p.exited() {
		return nil
	}
	tail := lastLines(p.out.String(), TailLines)
	if p.waitErr == nil {
		return fmt.Errorf("%s exited: exit status 0; last output:\n%s", p.name, tail)
	}
	return fmt.Errorf("%s exited: %w; last output:\n%s", p.name, p.waitErr, tail)
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// lastLines returns the last n lines of s, without a trailing newline.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// output is a process's stdout and stderr: a writer safe for both pipes'
// copying goroutines that keeps the last limit bytes.
type output struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped int64 // bytes cut from the front of buf
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b...)
	if len(o.buf) > 2*o.limit { // trim now and then, not on every write
		cut := len(o.buf) - o.limit
		o.dropped += int64(cut)
		o.buf = append(o.buf[:0], o.buf[cut:]...)
	}
	return len(b), nil
}

// String is the kept output: all of it, or past limit a line counting the
// bytes dropped and then the last whole lines within limit bytes.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, dropped := o.buf, o.dropped
	if len(b) > o.limit {
		dropped += int64(len(b) - o.limit)
		b = b[len(b)-o.limit:]
	}
	if dropped == 0 {
		return string(b)
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 { // start at a whole line
		dropped += int64(i + 1)
		b = b[i+1:]
	}
	return fmt.Sprintf("[%d earlier bytes dropped]\n%s", dropped, b)
}
