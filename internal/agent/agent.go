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
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/config"
	"github.com/plumbline/plumbline/internal/geometry"
	"github.com/plumbline/plumbline/internal/probe"
	"github.com/plumbline/plumbline/internal/spool"
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
	Logger      *slog.Logger  // default slog.Default()
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
	// lastSnap is the geometry snapshot spooled last; resync asks the
	// geometry loop for a new one (the server holds another digest).
	lastSnap atomic.Pointer[spooledSnapshot]
	resync   chan struct{}
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
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.Probe == nil {
		o.Probe = probe.Run
	}
	if o.Discover == nil {
		g := o.Geometry
		o.Discover = func(ctx context.Context) (Discovery, error) { return discover(ctx, g) }
	}
	sp, err := spool.Open(spool.Options{Dir: o.Config.Spool.Dir, MaxBytes: int64(o.Config.Spool.MaxBytes)})
	if err != nil {
		return nil, err
	}
	a := &Agent{o: o, log: o.Logger, spool: sp, metrics: newMetrics(sp), locks: newDeviceLocks(), mounts: newMountTable(o.ProcRoot),
		resync: make(chan struct{}, 1)}
	if c, ok := o.Renewer.(interface{ Collectors() []prometheus.Collector }); ok {
		a.metrics.reg.MustRegister(c.Collectors()...)
	}
	a.host.Store(hostFacts(o))
	a.geomInterval.Store(int64(o.Config.Intervals.GeometryRefresh))
	a.reportInterval.Store(int64(o.Config.Intervals.Report))
	return a, nil
}

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
	var dialOpts []grpc.DialOption
	if creds == nil {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecureCreds()))
	} else {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(creds))
	}
	if a.o.Renewer != nil {
		dialOpts = append(dialOpts, a.o.Renewer.DialOption())
	}
	conn, err := grpc.NewClient(a.o.Config.Server.Address, dialOpts...)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("server.address: %w", err)
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
	sched := &scheduler{a: a, running: map[string]context.CancelFunc{}}
	wg.Go(func() { a.geometryLoop(ctx, sched) })
	wg.Go(func() { a.sendLoop(ctx, conn) })
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
		a.log.Error("spool append", "err", err)
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
	cov := newCoverage(a.log, a.metrics, a.o.Config.Probes)
	run := func(trigger string) {
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
		if trigger == "start" || trigger == "resync" || !bytes.Equal(key, lastInv) {
			snap := &plumblinev1.Record{Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Inventory: inv, Trigger: trigger, Digest: key}}}
			if seq, err := a.append(snap); err == nil {
				lastInv = key
				a.lastSnap.Store(&spooledSnapshot{digest: key, seq: seq})
				a.metrics.snapshots.WithLabelValues(trigger).Inc()
			}
		}
		sched.update(ctx, inv.GetVolumes())
		cov.update(ctx, inv.GetVolumes(), d.Filtered)
	}
	run("start")
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
				run("changed")
			}
		case <-refresh.C:
			run("interval")
			refresh.Reset(time.Duration(a.geomInterval.Load()))
		case <-a.resync:
			run("resync")
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

// target is one (volume, kind) probe timer.
type target struct {
	mount      string
	device     string
	lockKeys   []string
	kind       probe.Kind
	sched      config.ProbeSchedule
	schedIndex int // in Config.Probes
}

func (t target) key() string {
	return t.mount + "\x00" + string(t.kind) + "\x00" + t.sched.Dir + "\x00" + fmt.Sprint(t.lockKeys)
}

// scheduler owns one goroutine per target, cloudprober style.
type scheduler struct {
	a       *Agent
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// targetsFor maps volumes to probe targets: the first schedule whose
// mount_point glob matches a volume's mount point (geometry.MatchMountPoint)
// wins for each kind.
func targetsFor(vols []*plumblinev1.Volume, scheds []config.ProbeSchedule) []target {
	var out []target
	for _, v := range vols {
		done := map[probe.Kind]bool{}
		for i, s := range scheds {
			if !geometry.MatchMountPoint(s.MountPoint, v.GetMountPoint()) {
				continue
			}
			for _, k := range s.Kinds {
				if done[k] {
					continue
				}
				done[k] = true
				out = append(out, target{mount: v.GetMountPoint(), device: v.GetDevice(), lockKeys: lockKeys(v), kind: k, sched: s, schedIndex: i})
			}
		}
	}
	return out
}

// lockKeys are the devices a probe on v loads: its disks, or the volume's
// device when the disks are unknown.
func lockKeys(v *plumblinev1.Volume) []string {
	var keys []string
	for _, l := range v.GetLayers() {
		if l.GetKind() == geometry.KindDisk && l.GetDevice() != "" && !slices.Contains(keys, l.GetDevice()) {
			keys = append(keys, l.GetDevice())
		}
	}
	if len(keys) == 0 {
		keys = []string{v.GetDevice()}
		if v.GetDevice() == "" {
			keys = []string{v.GetMountPoint()}
		}
	}
	slices.Sort(keys)
	return keys
}

// update starts timers for new targets and stops those that are gone.
func (s *scheduler) update(ctx context.Context, vols []*plumblinev1.Volume) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	want := map[string]target{}
	for _, t := range targetsFor(vols, s.a.o.Config.Probes) {
		want[t.key()] = t
	}
	for k, cancel := range s.running {
		if _, ok := want[k]; !ok {
			cancel()
			delete(s.running, k)
		}
	}
	for k, t := range want {
		if _, ok := s.running[k]; ok {
			continue
		}
		tctx, cancel := context.WithCancel(ctx)
		s.running[k] = cancel
		s.wg.Go(func() { s.a.probeLoop(tctx, t) })
		s.a.log.Info("probe scheduled", "mount_point", t.mount, "kind", t.kind, "every", t.sched.Every)
	}
}

// stop cancels every timer and waits for the running probes to end.
func (s *scheduler) stop() {
	s.mu.Lock()
	for k, cancel := range s.running {
		cancel()
		delete(s.running, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// jittered returns d plus a uniform draw from [0, j).
func jittered(d, j time.Duration) time.Duration {
	if j <= 0 {
		return d
	}
	return d + rand.N(j)
}

// probeLoop runs t's probe: first after a random delay in [0, jitter), then
// every `every` plus a fresh draw in [0, jitter).
func (a *Agent) probeLoop(ctx context.Context, t target) {
	timer := time.NewTimer(jittered(0, t.sched.Jitter))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		a.probeOnce(ctx, t)
		timer.Reset(jittered(t.sched.Every, t.sched.Jitter))
	}
}

// runTimeout bounds one run: the measured phase, the busy sampling, a
// first fill of the probe file at the fill rate, and slack.
func runTimeout(o probe.Options) time.Duration {
	d := o.MaxDuration + o.BusyWindow + 30*time.Second
	if o.FillRate > 0 {
		d += time.Duration(float64(o.FileSize) / float64(o.FillRate) * float64(time.Second))
	}
	return d
}

func (a *Agent) probeOnce(ctx context.Context, t target) {
	o := t.sched.ProbeOptions(t.kind)
	o.ProcRoot = a.o.ProcRoot
	if a.o.Geometry.SysfsRoot != "" {
		o.SysRoot = a.o.Geometry.SysfsRoot
	}
	rctx, cancel := context.WithTimeout(ctx, runTimeout(o))
	defer cancel()
	kind := string(t.kind)
	release, err := a.locks.acquire(rctx, t.lockKeys)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down
		}
		a.metrics.probeRuns.WithLabelValues(kind, "skipped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, probe.StopLockTimeout).Inc()
		err = fmt.Errorf("another probe held %v for the whole run timeout of %s", t.lockKeys, runTimeout(o))
		a.log.Warn("probe skipped", "mount_point", t.mount, "kind", kind, "reason", probe.StopLockTimeout, "err", err)
		a.spoolProbe(t, notRun(o, probe.Result{}, probe.StopLockTimeout, err))
		return
	}
	res, err := a.o.Probe(rctx, o)
	release()
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: says nothing about the volume
		}
		// A refused or failed run is reported like any other, so the
		// server sees a volume whose probes never run.
		reason := probe.FailureReason(err)
		a.metrics.probeRuns.WithLabelValues(kind, "error").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, reason).Inc()
		a.log.Error("probe", "mount_point", t.mount, "kind", kind, "reason", reason, "err", err)
		a.spoolProbe(t, notRun(o, res, reason, err))
		return
	}
	if res.FileRewrittenFrom > 0 {
		a.log.Warn("probe file rewritten: its size changed", "mount_point", t.mount, "file", res.File,
			"old_size_bytes", res.FileRewrittenFrom, "new_size_bytes", res.FileSize, "fill_seconds", res.FillSeconds)
	}
	switch {
	case res.Skipped:
		a.metrics.probeRuns.WithLabelValues(kind, "skipped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, res.StoppedReason).Inc()
	case res.StoppedReason != "":
		a.metrics.probeRuns.WithLabelValues(kind, "stopped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, res.StoppedReason).Inc()
	default:
		a.metrics.probeRuns.WithLabelValues(kind, "completed").Inc()
	}
	if res.StoppedReason == probe.StopInterrupted && ctx.Err() != nil {
		return // shutting down: an interrupted run says nothing about the volume
	}
	a.spoolProbe(t, res)
}

// spoolProbe spools one run of t.
func (a *Agent) spoolProbe(t target, res probe.Result) {
	pr := ProbeResultToProto(t.mount, res)
	if pr.Device == "" {
		pr.Device = path.Base(t.device)
	}
	a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: pr}})
}
