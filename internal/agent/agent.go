// Package agent is the agent's runtime (`agent run`): it discovers geometry
// at start, on mount-table change and every geometry_refresh; runs the
// configured probes on timers, one device at a time; writes every record to
// the durable spool first; and sends the spool to the server over gRPC with
// mutual TLS, removing records only once the server acknowledged them.
//
// Every goroutine belongs to Run and is stopped and waited for before Run
// returns.
package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/dbio"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/agent/spool"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/selfmetrics"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// ProbeFunc runs one probe; probe.Run in production, a fake in tests.
type ProbeFunc func(ctx context.Context, o probe.Options) (probe.Result, error)

// DiscoverFunc returns the host's inventory, alignment verdicts included,
// and the mounts discovery left out.
type DiscoverFunc func(ctx context.Context) (Discovery, error)

// Discovery is one geometry discovery's answer.
type Discovery struct {
	Inventory *plumblinev1.Inventory
	Filtered  []geometry.Filtered // mounts that are not volumes, and why
}

// Options configure an Agent.
type Options struct {
	Config  config.Agent // validated with ValidateRun
	AgentID string       // the identity to report as (required)
	Version string
	// Creds secure the gRPC connection (ClientTLS); nil: plaintext.
	Creds credentials.TransportCredentials
	// Renewer, when set, renews the client certificate over the agent's
	// connection (RenewingTLS); the connection dials through it.
	Renewer Renewer

	Geometry geometry.Options // discovery roots and settings (Config's applied by the caller)
	Discover DiscoverFunc     // nil: geometry.InspectVolumes + align.Evaluate
	Probe    ProbeFunc        // nil: probe.Run
	ProcRoot string           // for <procfs>/self/mountinfo (Linux) and the probes' diskstats; default /proc

	MountPoll   time.Duration // how often the mount table (Windows: the volume list) is checked for changes; default 5s
	BackoffBase time.Duration // default 1s
	BackoffMax  time.Duration // default 5m
	// RevokedRetry is the wait after the server refused this agent as
	// revoked (enroll.IsRevoked), instead of the backoff: only a new
	// enrollment helps; default 30m.
	RevokedRetry time.Duration
	Logger       *slog.Logger // default slog.Default()
	// Now is the clock maintenance windows are evaluated on (default
	// time.Now; tests shift it).
	Now func() time.Time
}

// Renewer keeps the client certificate fresh (enroll.Renewer).
type Renewer interface {
	DialOption() grpc.DialOption
	Run(ctx context.Context, conn grpc.ClientConnInterface)
}

// Agent is one running agent.
type Agent struct {
	o       Options
	log     *slog.Logger
	spool   *spool.Spool
	metrics *metrics
	locks   *deviceLocks
	mounts  mountTable

	geomInterval   atomic.Int64 // time.Duration, the server's or the config's
	reportInterval atomic.Int64
	maxBatch       atomic.Int64
	host           atomic.Pointer[plumblinev1.Host]
	// members are the member groups the member I/O loop samples, set by
	// the geometry loop (memberio_loop.go).
	members       atomic.Pointer[memberSet]
	memberMetrics *memberMetrics
	// lastSnap is the geometry snapshot spooled last; resync asks the
	// geometry loop for a new one (the server holds another digest).
	lastSnap atomic.Pointer[spooledSnapshot]
	resync   chan struct{}
	// eff is the effective configuration (the file merged with the
	// central policy); policyChanged tells the geometry loop it changed.
	eff           atomic.Pointer[effective]
	policyChanged chan struct{}
	// full: appends failing for want of space (spoolrecovery.go).
	full spoolFull
	// dbMounts is the last discovery's volumes and other mounts, where
	// the database sources place their files (databases.go); db their
	// metrics.
	dbMounts atomic.Pointer[dbio.Mounts]
	db       *dbMetrics
}

// spooledSnapshot is a geometry snapshot in the spool: its digest
// (GeometrySnapshot.digest) and sequence.
type spooledSnapshot struct {
	digest []byte
	seq    uint64
}

// New opens the spool; Run does the rest.
func New(o Options) (*Agent, error) {
	if o.AgentID == "" {
		return nil, errors.New("agent: no agent id")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.MountPoll <= 0 {
		o.MountPoll = 5 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Second
	}
	if o.RevokedRetry <= 0 {
		o.RevokedRetry = DefaultRevokedRetry
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.Probe == nil {
		o.Probe = probe.Run
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sp, err := spool.Open(spool.Options{Dir: o.Config.Spool.Dir, MaxBytes: int64(o.Config.Spool.MaxBytes)})
	if err != nil {
		return nil, err
	}
	a := &Agent{o: o, log: o.Logger, spool: sp, metrics: newMetrics(sp), locks: newDeviceLocks(), mounts: newMountTable(o.ProcRoot),
		resync: make(chan struct{}, 1), policyChanged: make(chan struct{}, 1)}
	a.metrics.reg.MustRegister(newSpoolCollector(sp))
	a.db = newDBMetrics(a.metrics.reg)
	a.logSpoolEvents()
	if c, ok := o.Renewer.(interface{ Collectors() []prometheus.Collector }); ok {
		a.metrics.reg.MustRegister(c.Collectors()...)
	}
	a.metrics.reg.MustRegister(selfmetrics.Collectors(o.Version)...) // build info, process, Go runtime
	if a.o.Discover == nil {
		// Discovery follows the effective declared devices.
		a.o.Discover = func(ctx context.Context) (Discovery, error) {
			return discover(ctx, a.eff.Load().cfg.GeometryOptions(o.Geometry))
		}
	}
	if err := a.startPolicy(); err != nil {
		sp.Close()
		return nil, err
	}
	a.registerMaintenance()
	a.metrics.reg.MustRegister(newConfigCollector(a))
	a.memberMetrics = newMemberMetrics(a.metrics.reg)
	a.host.Store(hostFacts(o))
	a.geomInterval.Store(int64(o.Config.Intervals.GeometryRefresh))
	a.reportInterval.Store(int64(o.Config.Intervals.Report))
	a.applyIntervals()
	return a, nil
}

// startPolicy sets the effective configuration at start: the file merged
// with the cached central policy (a cache that no longer parses is
// logged and ignored).
func (a *Agent) startPolicy() error {
	e, err := newEffective(a.o.Config, nil)
	if err != nil {
		return err
	}
	a.eff.Store(e)
	ap, err := LoadCachedPolicy(a.o.Config.Spool.Dir)
	if err == nil && ap != nil {
		if ce, cerr := newEffective(a.o.Config, ap); cerr == nil {
			a.eff.Store(ce)
			a.log.Info("central policy from the cache, until the server answers", "sources", ap.GetSources())
		} else {
			err = cerr
		}
	}
	if err != nil {
		a.log.Warn("cached central policy ignored", "err", err)
	}
	return nil
}

// EffectiveConfig is the configuration the agent runs with now, as YAML.
func (a *Agent) EffectiveConfig() ([]byte, error) { return a.eff.Load().print() }

// Spool is the agent's spool (for tests and status output).
func (a *Agent) Spool() *spool.Spool { return a.spool }

// Run runs the agent until ctx is cancelled, then stops every goroutine,
// waits for them and closes the spool. It returns an error only when it
// cannot start (e.g. the web listener cannot bind).
func (a *Agent) Run(ctx context.Context) error {
	defer a.spool.Close()
	var ln net.Listener
	if addr := a.o.Config.Web.ListenAddress; addr != "" {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("web.listen_address: %w", err)
		}
	}
	creds := a.o.Creds
	if creds == nil {
		creds = insecureCreds()
	}
	var extra []grpc.DialOption
	if a.o.Renewer != nil {
		extra = append(extra, a.o.Renewer.DialOption())
	}
	conn, err := dialServer(a.o.Config.Server, creds, a.o.BackoffBase, a.o.BackoffMax, extra...)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if ln != nil {
		srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("web server", "err", err)
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			srv.Shutdown(sctx)
		})
		a.log.Info("serving /healthz and /metrics", "address", ln.Addr().String())
	}
	a.logUnconfigured(a.eff.Load())
	sched := &scheduler{a: a, running: map[string]context.CancelFunc{}}
	wg.Go(func() { a.memberLoop(ctx) })
	wg.Go(func() { a.geometryLoop(ctx, sched) })
	wg.Go(func() { a.sendLoop(ctx, conn) })
	wg.Go(func() { a.databaseLoop(ctx, a.o.MountPoll) })
	if a.o.Renewer != nil {
		wg.Go(func() { a.o.Renewer.Run(ctx, conn) })
	}
	<-ctx.Done()
	wg.Wait()
	sched.stop()
	return nil
}

// append spools one record with the next sequence and returns it.
func (a *Agent) append(rec *plumblinev1.Record) (uint64, error) {
	seq, err := a.spool.Append(func(seq uint64) ([]byte, error) {
		rec.Sequence = seq
		rec.ProducedAt = timestamppb.Now()
		return proto.Marshal(rec)
	})
	if err != nil {
		a.metrics.spoolErrors.Inc()
		a.appendFailed(err)
	} else {
		a.appendOK()
	}
	return seq, err
}

// hostFacts is what Hello says about the host before the first geometry
// discovery (which may fail, or finish after the first Hello): os, kernel,
// hostname and machine id from the configured roots, and the agent version.
func hostFacts(o Options) *plumblinev1.Host {
	g := o.Geometry
	if g.ProcfsRoot == "" {
		g.ProcfsRoot = o.ProcRoot
	}
	h := geometry.DiscoverHost(g)
	h.AgentVersion = o.Version
	return h
}

// discover is the production DiscoverFunc: `agent inspect`'s answer.
func discover(ctx context.Context, opts geometry.Options) (Discovery, error) {
	res, err := geometry.InspectVolumes(ctx, opts)
	if err != nil {
		return Discovery{}, err
	}
	for _, v := range res.Volumes {
		v.Alignment = align.Evaluate(v)
	}
	return Discovery{Inventory: &plumblinev1.Inventory{Host: geometry.DiscoverHost(opts), Volumes: res.Volumes}, Filtered: res.Filtered}, nil
}

// geometryLoop discovers at start, when the mount table changes (a.mounts) and every
// geometry refresh interval; a snapshot is spooled when the inventory
// differs from the last one spooled, and always at start and when the
// sender asks for a resync (the server holds another snapshot than the
// last one spooled, see session).
func (a *Agent) geometryLoop(ctx context.Context, sched *scheduler) {
	lastMount := a.mounts.fingerprint()
	var lastInv []byte
	cov := newCoverage(a.log, a.metrics)
	var vols []*plumblinev1.Volume
	var filtered []geometry.Filtered
	declared := a.eff.Load().cfg.DeclaredDevices
	run := func(trigger vocab.Trigger) {
		d, err := a.o.Discover(ctx)
		inv := d.Inventory
		if err == nil && inv == nil {
			err = errors.New("discovery returned no inventory")
		}
		if err != nil {
			if ctx.Err() == nil {
				a.metrics.geometryError.Inc()
				a.log.Error("geometry discovery", "err", err)
			}
			return
		}
		if inv.Host != nil {
			inv.Host.AgentVersion = a.o.Version
			a.host.Store(proto.Clone(inv.Host).(*plumblinev1.Host))
		}
		key := inventoryKey(inv)
		if trigger.AlwaysSent() || !bytes.Equal(key, lastInv) {
			snap := &plumblinev1.Record{Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Inventory: inv, Trigger: string(trigger), Digest: key}}}
			if seq, err := a.append(snap); err == nil {
				lastInv = key
				a.lastSnap.Store(&spooledSnapshot{digest: key, seq: seq})
				a.metrics.snapshots.WithLabelValues(string(trigger)).Inc()
			}
		}
		vols, filtered = inv.GetVolumes(), d.Filtered
		a.dbMounts.Store(&dbio.Mounts{Volumes: vols, Filtered: filtered})
		sched.update(ctx, vols)
		cov.update(ctx, a.eff.Load().cfg.Probes, vols, filtered)
		a.setMembers(vols)
	}
	run(vocab.TriggerStart)
	refresh := time.NewTimer(time.Duration(a.geomInterval.Load()))
	defer refresh.Stop()
	poll := time.NewTicker(a.o.MountPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if h := a.mounts.fingerprint(); h != lastMount {
				lastMount = h
				run(vocab.TriggerChanged)
			}
		case <-refresh.C:
			run(vocab.TriggerInterval)
			refresh.Reset(time.Duration(a.geomInterval.Load()))
		case <-a.resync:
			run(vocab.TriggerResync)
		case <-a.policyChanged:
			refresh.Reset(time.Duration(a.geomInterval.Load()))
			if e := a.eff.Load(); !slices.EqualFunc(e.cfg.DeclaredDevices, declared, func(x, y config.DeclaredDevice) bool { return x == y }) {
				declared = e.cfg.DeclaredDevices
				run(vocab.TriggerChanged) // the declared devices are part of the geometry
				continue
			}
			sched.update(ctx, vols)
			cov.update(ctx, a.eff.Load().cfg.Probes, vols, filtered)
		}
	}
}

// inventoryKey identifies an inventory's content, collection times aside:
// the SHA-256 sent as GeometrySnapshot.digest.
func inventoryKey(inv *plumblinev1.Inventory) []byte {
	c := proto.Clone(inv).(*plumblinev1.Inventory)
	if c.Host != nil {
		c.Host.CollectedAt = nil
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	sum := sha256.Sum256(b)
	return sum[:]
}

// mountTable fingerprints what is mounted: a new fingerprint triggers a
// discovery. Linux hashes <procfs>/self/mountinfo (mounts_linux.go),
// Windows the volume list with its mount points (mounts_windows.go).
type mountTable interface {
	// fingerprint is 0 when the table cannot be read.
	fingerprint() uint64
}
