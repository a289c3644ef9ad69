//go:build linux

package agent

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestDatabaseSourceEndToEnd runs an agent with a real PostgreSQL as a
// database source: its intervals travel through the spool and the real
// gRPC connection to the server as DatabaseIO records, their files placed
// on the volume of the agent's discovery.
func TestDatabaseSourceEndToEnd(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes = nil
	c.Databases = agentkeys.WithDatabaseDefaults([]config.DatabaseSource{{
		Name: "main", Engine: vocab.EnginePostgreSQL, Address: u.Host, Database: strings.TrimPrefix(u.Path, "/"),
		User: u.User.Username(), Every: 200 * time.Millisecond, Timeout: 5 * time.Second,
		// A PostgreSQL in a chroot (PLUMBLINE_TEST_POSTGRES_ROOT, as the
		// dbio tests read it): where its files are on this host.
		Root: os.Getenv("PLUMBLINE_TEST_POSTGRES_ROOT"),
	}})
	a := newTestAgent(t, c, p, nil, fakeInventory("/"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var got []*plumblinev1.DatabaseIO
	waitFor(t, "two database_io records", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		got = got[:0]
		for _, r := range srv.stored {
			if r.GetDatabaseIo() != nil {
				got = append(got, r.GetDatabaseIo())
			}
		}
		return len(got) >= 2
	})
	cancel()
	<-done
	for _, d := range got {
		if d.GetSource() != "main" || d.GetEngine() != "postgresql" || d.GetInterval().AsDuration() <= 0 || len(d.GetSets()) == 0 {
			t.Errorf("record = %v, want source main, postgresql, an interval and sets", d)
		}
		for _, s := range d.GetSets() {
			if s.GetMountPoint() != "/" || s.GetDevice() != "sdb1" {
				t.Errorf("set %s %s on %q %q (%s), want the discovered volume /", s.GetLocation(), s.GetPath(), s.GetMountPoint(), s.GetDevice(), s.GetAttribution())
			}
		}
	}
}

// TestDatabaseSourceFromPolicy: a central policy that sets databases starts
// the source while the agent runs; one that no longer sets it stops it.
func TestDatabaseSourceFromPolicy(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes = nil
	a := newTestAgent(t, c, p, nil, fakeInventory("/"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	frag := fmt.Sprintf("databases:\n  - {name: central, engine: postgresql, address: %q, database: %s, user: %s, every: 10s, timeout: 5s}\n",
		u.Host, strings.TrimPrefix(u.Path, "/"), u.User.Username())
	a.applyPolicy(&plumblinev1.AgentPolicy{ConfigYaml: []byte(frag), Digest: []byte{1}, Sources: []string{"dbs"}})
	waitFor(t, "the central source's first sample", func() bool {
		return testutil.ToFloat64(a.db.samples.WithLabelValues("central", "first")) == 1
	})
	a.applyPolicy(&plumblinev1.AgentPolicy{ConfigYaml: []byte("intervals: {report: 1s}\n"), Digest: []byte{2}, Sources: []string{"other"}})
	waitFor(t, "the central source stopped", func() bool { return testutil.CollectAndCount(a.db.up) == 0 })
}
