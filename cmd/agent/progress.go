package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/bytesize"
)

// progressEvery is how often the progress line is redrawn.
const progressEvery = 250 * time.Millisecond

// progressPrinter watches one probe run. On a terminal it redraws one
// progress line on w (fill bytes, rate and ETA; then ops and ETA) and
// clears it at the end; otherwise it draws nothing. Either way it says once
// when an existing probe file is rewritten because --file-size changed.
type progressPrinter struct {
	w       io.Writer
	tty     bool
	p       *probe.Progress
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex // guards drawn, noticed and writes to w
	drawn   bool       // a progress line is on the screen
	noticed bool       // the rewrite notice was printed
	newSize int64
}

// stderrIsTerminal: progress goes to stderr, and only to a terminal.
func stderrIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f.Fd())
}

func startProgress(w io.Writer, tty bool, p *probe.Progress, newSize int64) *progressPrinter {
	pp := &progressPrinter{w: w, tty: tty, p: p, stop: make(chan struct{}), newSize: newSize}
	pp.done.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-pp.stop:
				return
			case <-t.C:
				pp.tick()
			}
		}
	})
	return pp
}

// finish stops the display, clears the line and, if the run rewrote the
// file and the notice was not printed yet, prints it now.
func (pp *progressPrinter) finish(res probe.Result) {
	close(pp.stop)
	pp.done.Wait()
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.clear()
	if res.FileRewrittenFrom > 0 {
		pp.notice(res.FileRewrittenFrom)
	}
}

func (pp *progressPrinter) tick() {
	s := pp.p.Snapshot()
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if s.Phase == probe.PhaseFill && s.RewriteFrom > 0 {
		pp.notice(s.RewriteFrom)
	}
	if !pp.tty {
		return
	}
	var line string
	switch s.Phase {
	case probe.PhaseFill:
		line = pp.fillLine(s)
	case probe.PhaseMeasure:
		line = measureLine(s)
	default:
		return
	}
	fmt.Fprintf(pp.w, "\r\033[K%s", line)
	pp.drawn = true
}

// notice says, once, that the probe file is being rewritten.
func (pp *progressPrinter) notice(from int64) {
	if pp.noticed {
		return
	}
	pp.clear()
	fmt.Fprintf(pp.w, "agent probe: --file-size changed from %s to %s: the probe file is rewritten in full\n",
		bytesize.Size(from), bytesize.Size(pp.newSize))
	pp.noticed = true
}

func (pp *progressPrinter) clear() {
	if pp.drawn {
		fmt.Fprint(pp.w, "\r\033[K")
		pp.drawn = false
	}
}

func (pp *progressPrinter) fillLine(s probe.ProgressSnapshot) string {
	now := time.Now()
	rate := 0.0
	if el := now.Sub(s.PhaseStarted).Seconds(); el > 0 {
		rate = float64(s.FillDone) / el
	}
	pct := 0.0
	if s.FillTotal > 0 {
		pct = 100 * float64(s.FillDone) / float64(s.FillTotal)
	}
	verb := "writing the probe file (first use)"
	if s.RewriteFrom > 0 {
		verb = "rewriting the probe file (--file-size changed)"
	}
	return fmt.Sprintf("%s: %s of %s (%.0f%%), %s/s, ETA %s", verb, humanBytes(float64(s.FillDone)), humanBytes(float64(s.FillTotal)), pct, humanBytes(rate), eta(float64(s.FillTotal-s.FillDone), rate))
}

func measureLine(s probe.ProgressSnapshot) string {
	rate := 0.0
	if el := time.Since(s.PhaseStarted).Seconds(); el > 0 {
		rate = float64(s.Ops) / el
	}
	return fmt.Sprintf("probing: %d of %d ops, %.0f ops/s, ETA %s", s.Ops, s.OpsBudget, rate, eta(float64(s.OpsBudget-s.Ops), rate))
}

// eta is how long left units take at rate per second.
func eta(left, rate float64) string {
	if rate <= 0 || left < 0 {
		return "?"
	}
	return (time.Duration(left / rate * float64(time.Second))).Round(time.Second).String()
}
