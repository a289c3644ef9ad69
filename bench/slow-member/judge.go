//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// namer asks the judge which members it names slow now: kernel device
// name → what it says of it.
type namer interface {
	named(ctx context.Context) (map[string]string, error)
}

// noNamer is -judge none: nothing is ever named (the run records the
// kernel's evidence only).
type noNamer struct{}

func (noNamer) named(context.Context) (map[string]string, error) { return nil, nil }

// summary writes one line per trial and returns the result line.
func (s *stack) summary(log io.Writer) string {
	var trials, right, wrong, controls, ctrlNamed int
	var secs []float64
	for _, a := range s.arrays {
		if a.trial == nil {
			controls++
			if len(a.ctrlNamed) > 0 {
				ctrlNamed++
			}
			continue
		}
		t := a.trial
		if t.at.IsZero() {
			continue // the fault could not be applied
		}
		trials++
		res := "not named"
		if !t.named.IsZero() {
			right++
			d := t.named.Sub(t.at)
			secs = append(secs, d.Seconds())
			res = fmt.Sprintf("named after %s", d.Round(time.Second))
		}
		if len(t.wrong) > 0 {
			wrong++
			res += fmt.Sprintf("; wrong: %v", t.wrong)
		}
		fmt.Fprintf(log, "slow-member: trial array %d %s %s member %d: %s\n", a.idx, a.shapes, t.kind.name, t.member, res)
	}
	med := "NA"
	if len(secs) > 0 {
		slices.Sort(secs)
		m := secs[len(secs)/2]
		if len(secs)%2 == 0 {
			m = (secs[len(secs)/2-1] + secs[len(secs)/2]) / 2
		}
		med = fmt.Sprintf("%.0f", m)
	}
	return fmt.Sprintf("trials=%d right_member=%d wrong_member=%d median_seconds=%s controls=%d controls_named=%d",
		trials, right, wrong, med, controls, ctrlNamed)
}

// storeNamer reads the judge's verdicts where the server keeps them: the
// member states in its store (the server's own SQLite under --dev), the
// members it names slow.
type storeNamer struct {
	dsn string
	st  *store.Store
}

func newStoreNamer(dataDir string) *storeNamer {
	return &storeNamer{dsn: "sqlite://" + filepath.Join(dataDir, "plumbline.db")}
}

func (n *storeNamer) named(ctx context.Context) (map[string]string, error) {
	if n.st == nil {
		st, err := store.Open(ctx, n.dsn)
		if err != nil {
			return nil, err
		}
		n.st = st
	}
	slow, err := n.st.ListSlowMembers(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(slow))
	for _, m := range slow {
		out[m.Device] = fmt.Sprintf("%s of %s, %s x%.2f (%.1f vs %.1f ms) since %s, serial %q, by-id %v",
			m.Device, m.GroupDevice, m.Direction, m.Ratio, m.AwaitSeconds*1e3, m.SiblingsAwaitSeconds*1e3,
			m.Since.UTC().Format("15:04:05"), m.Serial, m.ByID)
	}
	return out, nil
}

func (n *storeNamer) close() {
	if n.st != nil {
		n.st.Close()
	}
}
