package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/policy"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// PolicyCacheFile is where the agent keeps the last central policy it
// received, in its spool directory: a restart while the server is away
// keeps the policy (maintenance windows above all), and `agent run
// --print-config` reads it.
const PolicyCacheFile = "central-policy.pb"

// policyWait is how long one WatchPolicy call may wait for a change (the
// server caps it too).
const policyWait = 5 * time.Minute

// effective is the configuration the agent runs with: its file merged
// with the central policy (config.Merge).
type effective struct {
	cfg     config.Agent
	windows maintenance.Set
	central *plumblinev1.AgentPolicy // nil: none received
	origins config.Origins
}

// digest is the central policy's digest (nil: none).
func (e *effective) digest() []byte { return e.central.GetDigest() }

// newEffective merges local with the central policy ap (nil or empty:
// none).
func newEffective(local config.Agent, ap *plumblinev1.AgentPolicy) (*effective, error) {
	var frag *policy.Fragment
	if len(ap.GetConfigYaml()) > 0 {
		f, err := policy.ParseFragment(ap.GetConfigYaml())
		if err != nil {
			return nil, fmt.Errorf("central policy %v: %w", ap.GetSources(), err)
		}
		frag = &f
	}
	cfg, origins := config.Merge(local, frag)
	ws, err := maintenance.Compile(cfg.MaintenanceWindows)
	if err != nil {
		return nil, err
	}
	return &effective{cfg: cfg, windows: ws, central: ap, origins: origins}, nil
}

// print is the effective configuration as YAML with its origins.
func (e *effective) print() ([]byte, error) {
	return config.Print(e.cfg, e.origins, e.central.GetSources())
}

// LoadCachedPolicy reads the central policy cached in spoolDir (nil when
// there is none).
func LoadCachedPolicy(spoolDir string) (*plumblinev1.AgentPolicy, error) {
	b, err := os.ReadFile(filepath.Join(spoolDir, PolicyCacheFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("central policy cache: %w", err)
	}
	ap := &plumblinev1.AgentPolicy{}
	if err := proto.Unmarshal(b, ap); err != nil {
		return nil, fmt.Errorf("central policy cache %s: %w", PolicyCacheFile, err)
	}
	return ap, nil
}

// EffectiveConfig is `agent run --print-config`: local merged with the
// central policy cached in its spool directory, as YAML.
func EffectiveConfig(local config.Agent) ([]byte, error) {
	ap, err := LoadCachedPolicy(local.Spool.Dir)
	if err != nil {
		return nil, err
	}
	e, err := newEffective(local, ap)
	if err != nil {
		return nil, err
	}
	return e.print()
}

// applyPolicy makes ap the agent's central policy when its digest differs
// from the one held: it merges, caches it, applies its intervals and
// tells the geometry loop (which re-targets the probes, and re-discovers
// when the declared devices changed). A policy that does not parse is
// logged and counted; the agent keeps the one it has.
func (a *Agent) applyPolicy(ap *plumblinev1.AgentPolicy) {
	if ap == nil {
		return
	}
	old := a.eff.Load()
	if old.central != nil && bytes.Equal(old.digest(), ap.GetDigest()) {
		return
	}
	e, err := newEffective(a.o.Config, ap)
	if err != nil {
		a.metrics.policyErrors.Inc()
		a.log.Error("central policy refused; keeping the current configuration", "err", err)
		return
	}
	a.eff.Store(e)
	a.logUnconfiguredChange(old, e)
	if b, err := proto.Marshal(ap); err == nil {
		if err := atomicfile.Write(filepath.Join(a.o.Config.Spool.Dir, PolicyCacheFile), b, 0o600); err != nil {
			a.log.Warn("central policy cache not written", "err", err)
		}
	}
	a.applyIntervals()
	a.metrics.policyUpdates.Inc()
	a.log.Info("central policy applied", "sources", ap.GetSources(), "digest", fmt.Sprintf("%x", ap.GetDigest()),
		"probes", e.origins[policy.KeyProbes], "declared_devices", e.origins[policy.KeyDeclaredDevices], "maintenance_windows", e.windows.Len())
	select {
	case a.policyChanged <- struct{}{}:
	default: // one is already pending
	}
}

// applyIntervals takes the effective configuration's intervals when the
// central policy sets them (otherwise the Hello answer's stand).
func (a *Agent) applyIntervals() {
	e := a.eff.Load()
	if e.origins["intervals"] != "central" {
		return
	}
	a.geomInterval.Store(int64(e.cfg.Intervals.GeometryRefresh))
	a.reportInterval.Store(int64(e.cfg.Intervals.Report))
}

// watchPolicy keeps one WatchPolicy call open for the session, applying
// every policy it answers. It returns when ctx ends or the server does not
// serve WatchPolicy; other errors are retried after the report interval.
func (a *Agent) watchPolicy(ctx context.Context, client plumblinev1.AgentServiceClient) {
	for ctx.Err() == nil {
		e := a.eff.Load()
		yml, err := e.print()
		if err != nil || len(yml) > 64<<10 {
			yml = nil
		}
		host := a.host.Load()
		cctx, cancel := context.WithTimeout(ctx, policyWait+callTimeout)
		resp, err := client.WatchPolicy(cctx, &plumblinev1.WatchPolicyRequest{AgentId: a.o.AgentID, Hostname: host.GetHostname(),
			Labels: a.o.Config.Labels, PolicyDigest: e.digest(), Wait: durationpb.New(policyWait), EffectiveConfigYaml: yml})
		cancel()
		switch {
		case err == nil:
			a.applyPolicy(resp.GetPolicy())
			continue
		case ctx.Err() != nil:
			return
		case status.Code(err) == codes.Unimplemented:
			a.log.Info("the server does not serve WatchPolicy: central policy changes arrive at the next Hello")
			return
		}
		a.log.Warn("watching the central policy", "err", err)
		if ctxtime.Sleep(ctx, time.Duration(a.reportInterval.Load())) != nil {
			return
		}
	}
}
