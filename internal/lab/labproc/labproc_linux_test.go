//go:build linux

package labproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/labproc"
)

func sh(script string) *exec.Cmd { return exec.Command("/bin/sh", "-c", script) }

// The children that must catch a stop signal are this test binary itself
// (TestMain below): a shell cannot trap a signal ignored when it started,
// and a test run as a background job starts with SIGINT ignored; a Go
// program that asks for the signal gets it either way.
const childEnv = "LABPROC_TEST_CHILD" // "catch:NAME:FILE" or "ignore"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(childEnv); {
	case strings.HasPrefix(mode, "catch:"):
		// Append NAME to FILE when stopped, and exit 0.
		name, file, _ := strings.Cut(strings.TrimPrefix(mode, "catch:"), ":")
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		if file != "" {
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				os.Exit(2)
			}
			fmt.Fprintln(f, name)
			f.Close()
		}
		os.Exit(0)
	case mode == "ignore":
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(m.Run())
}

// child is this test binary as a child in mode (childEnv).
func child(t *testing.T, g *labproc.Group, name, mode string) *labproc.Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	p, err := g.Start(name, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, g *labproc.Group, name, script string) *labproc.Proc {
	t.Helper()
	p, err := g.Start(name, sh(script))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ready waits until p has printed "ready" (its trap is set).
func ready(t *testing.T, p *labproc.Proc) {
	t.Helper()
	for !strings.Contains(p.Output(), "ready") {
		select {
		case <-p.Done():
			t.Fatalf("%s exited before it was ready: %v", p.Name(), p.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// signalOf is the signal that ended p, or 0.
func signalOf(p *labproc.Proc) syscall.Signal {
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) {
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

func TestExitedReportsEarlyExitWithLastLines(t *testing.T) {
	t.Parallel()
	g := &labproc.Group{}
	t.Cleanup(g.Close)
	steady := start(t, g, "steady", "echo up; exec sleep 600")
	if p := g.Exited(); p != nil {
		t.Fatalf("Exited() = %s with only a sleeper running, want nil", p.Name())
	}
	early := start(t, g, "early", `i=1; while [ $i -le 30 ]; do echo line $i; i=$((i+1)); done; echo oops >&2; exit 3`)
	<-early.Done()

	p := g.Exited()
	if p != early {
		t.Fatalf("Exited() = %v, want the early process", p)
	}
	err := p.Err()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Err() = %v, want an *exec.ExitError with status 3", err)
	}
	msg := err.Error()
	// The last 20 lines: line 12 … line 30 and stderr's oops, in order.
	if !strings.HasPrefix(msg, "early exited: exit status 3; last output:\nline 12\n") || !strings.HasSuffix(msg, "line 29\nline 30\noops") {
		t.Errorf("Err() = %q, want the status and lines 12 to 30 then oops", msg)
	}
	if strings.Contains(msg, "line 11\n") {
		t.Errorf("Err() = %q, want only the last %d lines", msg, labproc.TailLines)
	}
	if steady.Err() != nil || g.Running("steady") != steady {
		t.Errorf("steady: Err() = %v, Running = %v; want it running", steady.Err(), g.Running("steady"))
	}
}

func TestCloseStopsInReverseStartOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		signal os.Signal
	}{
		{"default interrupt", nil},
		{"SIGTERM", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			order := filepath.Join(t.TempDir(), "order")
			g := &labproc.Group{Signal: tc.signal}
			var procs []*labproc.Proc
			for _, name := range []string{"first", "second", "third"} {
				procs = append(procs, child(t, g, name, "catch:"+name+":"+order))
			}
			for _, p := range procs {
				ready(t, p)
			}
			g.Close()
			b, err := os.ReadFile(order)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), "third\nsecond\nfirst\n"; got != want {
				t.Errorf("stop order %q, want %q", got, want)
			}
			for _, p := range procs {
				if err := p.Err(); err == nil || !strings.HasPrefix(err.Error(), p.Name()+" exited: exit status 0;") {
					t.Errorf("%s: Err() = %v, want a clean exit by its trap", p.Name(), err)
				}
			}
			if g.Exited() != nil || g.Logs() != "" {
				t.Errorf("after Close: Exited() = %v, Logs() = %q; want an empty group", g.Exited(), g.Logs())
			}
			g.Close() // again: nothing left to stop
		})
	}
}

func TestCloseKillsWhatIgnoresTheSignal(t *testing.T) {
	t.Parallel()
	// The polite child exits as soon as it is signalled; the grace is long
	// enough for that on a loaded machine and bounds the stubborn one's.
	g := &labproc.Group{Signal: syscall.SIGTERM, Grace: 2 * time.Second}
	stubborn := child(t, g, "stubborn", "ignore")
	polite := child(t, g, "polite", "catch::")
	ready(t, stubborn)
	ready(t, polite)
	g.Close()
	if s := signalOf(stubborn); s != syscall.SIGKILL {
		t.Errorf("stubborn ended by %v (Err %v), want SIGKILL", s, stubborn.Err())
	}
	if s := signalOf(polite); s != 0 || polite.Err() == nil {
		t.Errorf("polite ended by %v (Err %v), want its own exit", s, polite.Err())
	}
}

func TestOutputKeptWhole(t *testing.T) {
	t.Parallel()
	g := &labproc.Group{}
	t.Cleanup(g.Close)
	p := start(t, g, "both", "echo out; echo err >&2")
	<-p.Done()
	if got, want := p.Output(), "out\nerr\n"; got != want {
		t.Errorf("Output() = %q, want %q", got, want)
	}
	if got, want := g.Logs(), "----- both -----\nout\nerr\n\n"; got != want {
		t.Errorf("Logs() = %q, want %q", got, want)
	}
}

func TestOutputBounded(t *testing.T) {
	t.Parallel()
	const limit = 1000
	g := &labproc.Group{Limit: limit}
	t.Cleanup(g.Close)
	p := start(t, g, "talker", `i=1; while [ $i -le 500 ]; do echo line $i; i=$((i+1)); done`)
	<-p.Done()
	total := 0
	for i := 1; i <= 500; i++ {
		total += len(fmt.Sprintf("line %d\n", i))
	}

	out := p.Output()
	head, kept, ok := strings.Cut(out, "\n")
	var dropped int
	if _, err := fmt.Sscanf(head, "[%d earlier bytes dropped]", &dropped); !ok || err != nil {
		t.Fatalf("Output() starts %q, want a line counting the bytes dropped", head)
	}
	if len(kept) > limit || dropped+len(kept) != total {
		t.Errorf("kept %d bytes and dropped %d of %d, want at most %d kept and the rest counted", len(kept), dropped, total, limit)
	}
	if !strings.HasPrefix(kept, "line ") || !strings.HasSuffix(kept, "line 499\nline 500\n") {
		t.Errorf("kept %q, want whole lines up to the last", kept)
	}
	if got, want := g.Logs(), "----- talker -----\n"+out+"\n"; got != want {
		t.Errorf("Logs() = %q, want %q", got, want)
	}
}

func TestStopTakesOneNameOut(t *testing.T) {
	t.Parallel()
	g := &labproc.Group{Signal: syscall.SIGTERM}
	t.Cleanup(g.Close)
	a := start(t, g, "agent", "echo agent; exec sleep 600")
	s := start(t, g, "server", "echo server; exec sleep 600")
	g.Stop("agent")
	if s := signalOf(a); s != syscall.SIGTERM {
		t.Errorf("agent ended by %v (Err %v), want SIGTERM", s, a.Err())
	}
	if g.Running("agent") != nil || g.Exited() != nil {
		t.Errorf("after Stop: Running(agent) = %v, Exited() = %v; want both nil", g.Running("agent"), g.Exited())
	}
	if r := g.Running("server"); r != s || r.Pid() <= 0 {
		t.Errorf("Running(server) = %v, want the server with its pid", r)
	}
	if logs := g.Logs(); strings.Contains(logs, "----- agent -----") || !strings.HasPrefix(logs, "----- server -----\n") {
		t.Errorf("Logs() = %q, want the server's only", logs)
	}
}

func TestStartFailure(t *testing.T) {
	t.Parallel()
	g := &labproc.Group{}
	_, err := g.Start("missing", exec.Command(filepath.Join(t.TempDir(), "no-such-command")))
	if err == nil || !strings.HasPrefix(err.Error(), "start missing: ") {
		t.Errorf("Start = %v, want a start error naming the process", err)
	}
	if g.Logs() != "" || g.Exited() != nil {
		t.Errorf("after a failed Start: Logs() = %q, Exited() = %v; want an empty group", g.Logs(), g.Exited())
	}
}

var listening = regexp.MustCompile(`listening on (\S+)`)

func TestStartReadyReturnsTheReadyLine(t *testing.T) {
	t.Parallel()
	g := &labproc.Group{}
	t.Cleanup(g.Close)
	p, m, err := g.StartReady(context.Background(), "server", sh(`echo starting; echo warming >&2; echo listening on 127.0.0.1:1234; exec sleep 600`), listening, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[1] != "127.0.0.1:1234" {
		t.Errorf("StartReady matched %q, want the address", m)
	}
	if g.Running("server") != p {
		t.Errorf("Running(server) = %v, want the started process", g.Running("server"))
	}
	// stdout went to the ready scan, stderr to the kept output (all of it
	// once the process has exited).
	g.Close()
	if got, want := p.Output(), "warming\n"; got != want {
		t.Errorf("Output() = %q, want %q", got, want)
	}
}

func TestStartReadyFailures(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name, script string
		ctx          context.Context
		timeout      time.Duration
		want         string
	}{
		{"early", `echo boom >&2; exit 1`, context.Background(), time.Minute, "early exited: boom\n"},
		{"quiet", `echo waiting >&2; echo not yet; exec sleep 600`, context.Background(), 100 * time.Millisecond, "quiet did not start in 0.1s: waiting\n"},
		{"cancelled", `exec sleep 600`, cancelled, time.Minute, context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &labproc.Group{}
			t.Cleanup(g.Close)
			p, _, err := g.StartReady(tc.ctx, tc.name, sh(tc.script), listening, tc.timeout)
			if err == nil || err.Error() != tc.want {
				t.Errorf("StartReady = %v, want %q", err, tc.want)
			}
			if p == nil || g.Logs() == "" {
				t.Errorf("StartReady returned %v and Logs() %q, want the process kept in the group for Close", p, g.Logs())
			}
		})
	}
}
