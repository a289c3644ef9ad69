//go:build linux

package dbio

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/lab/mariadbtest"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSteps takes b.N samples of src, each diffed and placed, and
// reports the agent's CPU time per sample (cpu-ns/op): at every 60s, a
// sample of c CPU-ns costs c / 60e9 of one core.
func benchSteps(b *testing.B, src *Source) {
	ctx := context.Background()
	if _, _, err := src.Step(ctx); err != nil {
		b.Fatal(err)
	}
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "root0"}}}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for b.Loop() {
		d, ok, err := src.Step(ctx)
		if err != nil || !ok {
			b.Fatalf("Step: %v, %v", ok, err)
		}
		Record("bench", d, NewAttributor(m, nil))
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPostgresStep: one sample of the host's PostgreSQL (15: four
// statements) over the held connection.
func BenchmarkPostgresStep(b *testing.B) {
	dsn := pgtest.DSN(b)
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg := agentkeys.WithDatabaseDefaults([]Config{{Name: "pg", Engine: vocab.EnginePostgreSQL, Address: u.Host,
		Database: strings.TrimPrefix(u.Path, "/"), User: u.User.Username()}})[0]
	src, err := NewSource(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	benchSteps(b, src)
}

// BenchmarkMariaDBStep: one sample of a private MariaDB (four statements,
// every file with I/O read).
func BenchmarkMariaDBStep(b *testing.B) {
	srv := mariadbtest.Start(b)
	cfg := agentkeys.WithDatabaseDefaults([]Config{{Name: "maria", Engine: vocab.EngineMariaDB, Address: "127.0.0.1:" + strconv.Itoa(srv.Port), User: "root"}})[0]
	src, err := NewSource(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	benchSteps(b, src)
}
