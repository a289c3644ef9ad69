//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// apiNamer reads the judge's verdicts the way an operator would: the
// inventory API's volume rows (GET /api/v1/volumes), each with the
// members the judge names slow under it (slow_members).
type apiNamer struct {
	url string
	hc  *http.Client
}

func newAPINamer(addr string) *apiNamer {
	return &apiNamer{url: "http://" + addr + "/api/v1/volumes", hc: &http.Client{Timeout: 30 * time.Second}}
}

// apiSlowMember is the part of a slow_members entry the bench reads.
type apiSlowMember struct {
	Array     string    `json:"array"`
	Member    string    `json:"member"`
	ByID      []string  `json:"by_id"`
	Serial    string    `json:"serial"`
	Direction string    `json:"direction"`
	Ratio     float64   `json:"ratio"`
	Await     float64   `json:"await_seconds"`
	Siblings  float64   `json:"siblings_await_seconds"`
	Since     time.Time `json:"since"`
}

func (n *apiNamer) named(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", n.url, resp.Status)
	}
	var body struct {
		Volumes []struct {
			MountPoint  string           `json:"mount_point"`
			SlowMembers *[]apiSlowMember `json:"slow_members"`
		} `json:"volumes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", n.url, err)
	}
	out := map[string]string{}
	for _, v := range body.Volumes {
		if v.SlowMembers == nil {
			return nil, errNoSlowMembers
		}
		for _, m := range *v.SlowMembers {
			out[m.Member] = fmt.Sprintf("%s of %s (%s), %s x%.2f (%.1f vs %.1f ms) since %s, serial %q, by-id %v",
				m.Member, m.Array, v.MountPoint, m.Direction, m.Ratio, m.Await*1e3, m.Siblings*1e3,
				m.Since.UTC().Format("15:04:05"), m.Serial, m.ByID)
		}
	}
	return out, nil
}

// errNoSlowMembers: the server's volume rows have no slow_members (a server
// without the judge's API); the bench reads its store instead.
var errNoSlowMembers = errors.New("the inventory API's volume rows have no slow_members")

// fallbackNamer asks the API and, while the API has no slow_members, the
// store.
type fallbackNamer struct {
	api      *apiNamer
	fallback namer // the server's store
	log      io.Writer
	said     bool
}

func (f *fallbackNamer) named(ctx context.Context) (map[string]string, error) {
	got, err := f.api.named(ctx)
	if !errors.Is(err, errNoSlowMembers) {
		return got, err
	}
	if !f.said {
		fmt.Fprintln(f.log, "slow-member: the inventory API has no slow_members; asking the server's store")
		f.said = true
	}
	return f.fallback.named(ctx)
}
