package ingest

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// DefaultPolicyMaxWait caps a WatchPolicy call: well inside the agent's
// and any proxy's idle timeouts, and the server's keepalive pings keep the
// connection alive meanwhile.
const DefaultPolicyMaxWait = 5 * time.Minute

// MaxEffectiveConfigBytes bounds WatchPolicyRequest.effective_config_yaml.
const MaxEffectiveConfigBytes = 64 << 10

// agentPolicy resolves the agent's central policy (nil without a policy
// source), with a channel closed at the policy's next change, and records
// what the agent said (effective nil: a Hello).
func (s *Service) agentPolicy(ctx context.Context, agent, hostname string, labels map[string]string, effective *plumblinev1.WatchPolicyRequest, now time.Time) (*plumblinev1.AgentPolicy, <-chan struct{}, error) {
	r := store.AgentPolicy{AgentID: agent, Labels: labels, ReportedAt: now}
	if effective != nil {
		r.EffectiveConfig, r.AppliedDigest = string(effective.GetEffectiveConfigYaml()), hex.EncodeToString(effective.GetPolicyDigest())
	}
	if err := s.store.PutAgentPolicy(ctx, r); err != nil {
		return nil, nil, s.storeError(ctx, "policy", agent, err)
	}
	if s.opts.Policy == nil {
		return nil, nil, nil
	}
	selection, err := s.selectionLabels(ctx, agent, labels, true)
	if err != nil {
		return nil, nil, s.storeError(ctx, "policy", agent, err)
	}
	res, changed, err := s.opts.Policy.Resolve(policy.Facts{Hostname: hostname, Labels: selection})
	if err != nil {
		s.opts.Logger.Error("policy", "agent", agent, "err", err)
		return nil, nil, status.Error(codes.Internal, "policy: resolving failed")
	}
	return &plumblinev1.AgentPolicy{ConfigYaml: res.YAML, Digest: res.Digest, Sources: res.Sources}, changed, nil
}

// selectionLabels are the labels policy selects the agent by: the labels
// its join token gave it at enrollment, which the operator issued and the
// server keeps, over the labels the agent declares in its config. An
// agent cannot claim another team's policy by declaring a label its token
// fixed: on a key in both, the enrollment's value wins and the clash is
// logged (when log).
//
// Keys are compared canonical (labels.CanonicalKey): a token's "Role"
// fixes an agent's "role".
func (s *Service) selectionLabels(ctx context.Context, agent string, declared map[string]string, log bool) (map[string]string, error) {
	declared = labels.Fold(declared)
	stored, err := s.store.AgentLabels(ctx, agent)
	if err != nil || len(stored) == 0 {
		return declared, err
	}
	// Tokens issued before keys were stored canonical may hold "Role".
	enrolled := labels.Fold(stored)
	out := make(map[string]string, len(declared)+len(enrolled))
	for k, v := range declared {
		out[k] = v
	}
	for k, v := range enrolled {
		if d, ok := declared[k]; ok && d != v && log {
			s.opts.Logger.Warn("policy: the agent declares a label its enrollment fixed; the enrollment's value selects",
				"agent", agent, "label", k, "declared", d, "enrolled", v)
		}
		out[k] = v
	}
	return out, nil
}

// WatchPolicy answers the agent's central policy once it differs from the
// digest the agent holds, or when the wait is over (a blocking query).
func (s *Service) WatchPolicy(ctx context.Context, req *plumblinev1.WatchPolicyRequest) (*plumblinev1.WatchPolicyResponse, error) {
	if err := s.checkCaller(ctx, req.GetAgentId()); err != nil {
		return nil, err
	}
	if err := checkWatchRequest(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := checkGeneric(req.ProtoReflect(), "watch", s.opts.Limits.withDefaults(), 0); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	defer s.live.open(req.GetAgentId())() // connected while the call is open (liveness.go)
	hostname := req.GetHostname()
	if hostname == "" {
		hostname = req.GetAgentId()
	}
	wait := s.opts.PolicyMaxWait
	if d := req.GetWait().AsDuration(); req.GetWait() != nil && d >= 0 && d < wait {
		wait = d
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		pol, changed, err := s.agentPolicy(ctx, req.GetAgentId(), hostname, labels.Fold(req.GetLabels()), req, s.opts.Now())
		if err != nil {
			return nil, err
		}
		if s.opts.Policy == nil {
			select { // no policy can appear: wait the whole time
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			case <-timer.C:
				return &plumblinev1.WatchPolicyResponse{Policy: &plumblinev1.AgentPolicy{}}, nil
			}
		}
		if string(pol.GetDigest()) != string(req.GetPolicyDigest()) {
			return &plumblinev1.WatchPolicyResponse{Policy: pol}, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return &plumblinev1.WatchPolicyResponse{Policy: pol}, nil
		case <-changed:
		}
	}
}

// PolicyReports is what the agents of host (host name or agent id) last
// said of their policy: the policy API's policy.ReportLister. Each
// report's labels are the ones policy selects the agent by (its join
// token's over its declared ones, selectionLabels), so the API resolves
// the policy the agent gets.
func (s *Service) PolicyReports(ctx context.Context, host string) ([]policy.Report, error) {
	ps, err := s.store.AgentPolicies(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]policy.Report, len(ps))
	for i, p := range ps {
		labels, err := s.selectionLabels(ctx, p.AgentID, p.Labels, false)
		if err != nil {
			return nil, err
		}
		out[i] = policy.Report{AgentID: p.AgentID, Hostname: p.Hostname, Labels: labels, Effective: p.EffectiveConfig, AppliedDigest: p.AppliedDigest, At: p.ReportedAt}
	}
	return out, nil
}

// checkWatchRequest checks what a WatchPolicy call says about the host.
func checkWatchRequest(req *plumblinev1.WatchPolicyRequest) error {
	if err := checkHostField(req.GetHostname()); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := labels.Check(req.GetLabels()); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	if n := len(req.GetEffectiveConfigYaml()); n > MaxEffectiveConfigBytes {
		return fmt.Errorf("effective_config_yaml: %d bytes, want at most %d", n, MaxEffectiveConfigBytes)
	}
	if d := req.GetPolicyDigest(); len(d) != 0 && len(d) != 32 {
		return fmt.Errorf("policy_digest: %d bytes, want 0 or 32", len(d))
	}
	if w := req.GetWait(); w != nil && w.CheckValid() != nil {
		return fmt.Errorf("wait: %w", w.CheckValid())
	}
	return nil
}
