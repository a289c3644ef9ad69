package labproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"time"
)

// StartReady starts cmd as Start does and waits until a line of its
// stdout matches ready (e.g. the address a server prints once it
// listens), returning the first such line's submatches. StartReady takes
// cmd's stdout: it is read, and once ready has matched dropped, until the
// process exits; it is not in the kept output (stderr is).
//
// It fails if the process exits first ("NAME exited: OUTPUT"), if timeout
// passes first ("NAME did not start in Ns: OUTPUT") or when ctx ends. A
// process that was started stays in the group, for Close, even then.
func (g *Group) StartReady(ctx context.Context, name string, cmd *exec.Cmd, ready *regexp.Regexp, timeout time.Duration) (*Proc, []string, error) {
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	p, err := g.Start(name, cmd)
	if err != nil {
		pw.Close()
		return nil, nil, err
	}
	found := make(chan []string, 1)
	go func() { // owned: ends when the process's stdout closes
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr) // past a line too long to scan: keep the pipe flowing
	}()
	go func() { <-p.Done(); pw.Close() }() // owned: ends with the process
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-found:
		return p, m, nil
	case <-p.Done():
		return p, nil, fmt.Errorf("%s exited: %s", name, p.Output())
	case <-t.C:
		return p, nil, fmt.Errorf("%s did not start in %gs: %s", name, timeout.Seconds(), p.Output())
	case <-ctx.Done():
		return p, nil, ctx.Err()
	}
}
