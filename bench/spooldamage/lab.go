package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// lab is a real server (ingest over a real store, gRPC with mutual TLS on
// a loopback port it keeps across restarts) and the configuration of a
// real agent that reports to it.
type lab struct {
	dir  string
	st   *store.Store
	tls  *tls.Config
	addr string
	gs   *grpc.Server
	cfg  config.Agent
}

// newLab opens the store at dsn, issues a CA, the server's and agent
// db1's certificates under dir, and starts the server. spoolDir is the
// agent's spool directory.
func newLab(ctx context.Context, dir, dsn, spoolDir string) (*lab, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	ca, err := devca.Create(filepath.Join(dir, "ca"))
	if err != nil {
		st.Close()
		return nil, err
	}
	srvLeaf, err := ca.IssueServer("127.0.0.1", "localhost")
	if err != nil {
		st.Close()
		return nil, err
	}
	agentLeaf, err := ca.IssueAgent("db1")
	if err != nil {
		st.Close()
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "agent.crt"), filepath.Join(dir, "agent.key")
	if err := agentLeaf.WriteFiles(certFile, keyFile); err != nil {
		st.Close()
		return nil, err
	}
	l := &lab{dir: dir, st: st, addr: "127.0.0.1:0", tls: &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{srvLeaf.TLSCertificate()},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert,
	}}
	if err := l.start(); err != nil {
		st.Close()
		return nil, err
	}
	c := config.Default()
	c.Server = config.Server{Address: l.addr, TLS: config.ClientTLS{CAFile: ca.CertPath(), CertFile: certFile, KeyFile: keyFile, ServerName: "localhost"}}
	c.Spool.Dir = spoolDir
	c.Intervals.Report = 50 * time.Millisecond
	zero := 0.0
	c.Probes = []config.ProbeSchedule{{
		MountPoint: "/data*", Dir: dir, Kinds: []probe.Kind{probe.RandomRead, probe.LogWrite},
		Every: 10 * time.Millisecond, Ops: 10, IOPS: &zero, MaxDuration: time.Second, FileSize: 2 << 20,
		BlockSize: 8 << 10, QueueDepth: 1, Sync: probe.SyncDsync, BusyThreshold: &zero, Jitter: 5 * time.Millisecond,
	}}
	l.cfg = c
	return l, nil
}

// start serves on the lab's address (the same one after a stop).
func (l *lab) start() error {
	svc := ingest.New(l.st, ingest.Options{ReportInterval: 50 * time.Millisecond, RatePerSecond: -1})
	gs, _, err := ingest.NewGRPCServer(svc, l.tls)
	if err != nil {
		return err
	}
	var ln net.Listener
	for range 100 { // the port may linger briefly after a stop
		if ln, err = net.Listen("tcp", l.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	l.addr, l.gs = ln.Addr().String(), gs
	go gs.Serve(ln)
	return nil
}

// stop stops the server once its handlers have returned.
func (l *lab) stop() {
	if l.gs != nil {
		l.gs.GracefulStop()
		l.gs = nil
	}
}

func (l *lab) close() { l.stop(); l.st.Close() }

// stored counts the records the store holds.
func (l *lab) stored(ctx context.Context) (uint64, error) {
	counts, err := l.st.RecordCounts(ctx)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// conflicts is the identity conflicts the store counted for the agent,
// and the incarnation it holds as the agent's current one.
func (l *lab) conflicts(ctx context.Context) (uint64, string, error) {
	hosts, err := l.st.ListHosts(ctx)
	if err != nil || len(hosts) != 1 {
		return 0, "", fmt.Errorf("hosts %v: %w", hosts, err)
	}
	return hosts[0].IdentityConflicts, hosts[0].Incarnation, nil
}

// logBuffer collects an agent's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Count(w.b.Bytes(), []byte(s))
}

// running is an agent run: its spool's first sequence, and how to stop it.
type running struct {
	a     *agent.Agent
	start uint64
	stop  func() error
}

// generated is how many records the run appended (its sequences; an
// append that fails numbers none).
func (r *running) generated() uint64 { return r.a.Spool().Stats().NextSequence - r.start }

// runAgent starts a real agent with the lab's configuration (c), whose
// probes are a fake that completes at once, logging to log.
func (l *lab) runAgent(c config.Agent, log *logBuffer) (*running, error) {
	tc, id, err := agent.ClientTLS(c.Server)
	if err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Options{
		Config: c, AgentID: id, Version: "spooldamage", Creds: credentials.NewTLS(tc),
		Discover: fakeInventory, Probe: fakeProbe, MountPoll: 20 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	r := &running{a: a, start: a.Spool().Stats().NextSequence}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	r.stop = func() error { cancel(); return <-done }
	return r, nil
}

func fakeInventory(context.Context) (agent.Discovery, error) {
	inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}, Volumes: []*plumblinev1.Volume{{
		MountPoint: "/data1", Device: "/dev/sdb1",
		Layers: []*plumblinev1.Layer{{Kind: "partition", Device: "sdb1"}, {Kind: "disk", Device: "sdb"}},
	}}}
	return agent.Discovery{Inventory: inv}, nil
}

func fakeProbe(ctx context.Context, o probe.Options) (probe.Result, error) {
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
	}
	var h histogram.Histogram
	h.Observe(100 * time.Microsecond)
	h.Observe(300 * time.Microsecond)
	return probe.Result{Kind: o.Kind, BlockSize: o.BlockSize, QueueDepth: 1, Ops: 2, Bytes: int64(2 * o.BlockSize),
		Duration: 0.001, StartedAt: time.Now(), OpsBudget: o.Ops, Histogram: &h, File: filepath.Join(o.Dir, probe.DefaultFileName)}, nil
}

// waitFor polls cond every 10 ms for up to limit.
func waitFor(what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// writeFile rewrites a spool file.
func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o600) }
