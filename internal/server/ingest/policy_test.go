package ingest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func windowEntry(name, label string) policy.Entry {
	return policy.Entry{Name: name, Select: policy.Selector{Labels: map[string]string{"role": label}},
		Policy: policy.Fragment{MaintenanceWindows: []maintenance.Window{{Name: name, Schedule: "0 2 * * *", Duration: time.Hour}}}}
}

// Hello answers the policy of the agent's labels; WatchPolicy answers at
// once when the agent's digest is stale, blocks while it is current, and
// wakes when the policy changes.
func TestPolicyHelloAndWatch(t *testing.T) {
	t.Parallel()
	src := policy.NewSource([]policy.Entry{windowEntry("pg-nightly", "postgres")})
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Policy: src})
	c := e.agent(t, "db1")
	labels := map[string]string{"role": "postgres"}
	h, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, AgentVersion: "1", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	p := h.GetPolicy()
	if len(p.GetDigest()) != 32 || !strings.Contains(string(p.GetConfigYaml()), "pg-nightly") || strings.Join(p.GetSources(), ",") != "pg-nightly" {
		t.Fatalf("Hello policy = %v", p)
	}
	// Another host's labels: another (empty) policy.
	h2, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, AgentVersion: "1", Labels: map[string]string{"role": "mysql"}})
	if err != nil || len(h2.GetPolicy().GetConfigYaml()) != 0 || h2.GetPolicy() == nil {
		t.Fatalf("Hello with unmatched labels = %v, %v: want an empty policy", h2.GetPolicy(), err)
	}

	// Current digest: the call waits for its wait, then answers the same.
	start := time.Now()
	w, err := c.WatchPolicy(ctxT(t), &plumblinev1.WatchPolicyRequest{AgentId: "db1", Hostname: "db1", Labels: labels, PolicyDigest: p.GetDigest(), Wait: durationpb.New(300 * time.Millisecond)})
	if err != nil || string(w.GetPolicy().GetDigest()) != string(p.GetDigest()) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("WatchPolicy with the current digest = %v, %v after %s: want the same policy after the wait", w, err, time.Since(start))
	}
	// A change wakes a waiting call.
	done := make(chan *plumblinev1.WatchPolicyResponse, 1)
	go func() {
		w, _ := c.WatchPolicy(ctxT(t), &plumblinev1.WatchPolicyRequest{AgentId: "db1", Hostname: "db1", Labels: labels, PolicyDigest: p.GetDigest(),
			Wait: durationpb.New(time.Minute), EffectiveConfigYaml: []byte("probes: []\n")})
		done <- w
	}()
	waitReport(t, e.svc, "db1", func(r policy.Report) bool { return r.Effective == "probes: []\n" && r.Labels["role"] == "postgres" })
	src.Update([]policy.Entry{windowEntry("pg-weekly", "postgres")})
	select {
	case w := <-done:
		if !strings.Contains(string(w.GetPolicy().GetConfigYaml()), "pg-weekly") {
			t.Errorf("woken WatchPolicy = %v, want the new policy", w.GetPolicy())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WatchPolicy did not wake on the policy change")
	}

	for _, tc := range []struct {
		name string
		req  *plumblinev1.WatchPolicyRequest
		want string
	}{
		{"bad label key", &plumblinev1.WatchPolicyRequest{AgentId: "db1", Labels: map[string]string{"-role": "x"}}, "labels"},
		{"bidi control in a value", &plumblinev1.WatchPolicyRequest{AgentId: "db1", Labels: map[string]string{"role": "\u202edb"}}, "labels"},
		{"keys differing only in case", &plumblinev1.WatchPolicyRequest{AgentId: "db1", Labels: map[string]string{"Role": "a", "role": "b"}}, "case-insensitive"},
		{"control character in a value", &plumblinev1.WatchPolicyRequest{AgentId: "db1", Labels: map[string]string{"role": "a\x1b"}}, "labels"},
		{"effective config too large", &plumblinev1.WatchPolicyRequest{AgentId: "db1", EffectiveConfigYaml: make([]byte, MaxEffectiveConfigBytes+1)}, "effective_config_yaml"},
		{"digest length", &plumblinev1.WatchPolicyRequest{AgentId: "db1", PolicyDigest: []byte{1}}, "policy_digest"},
		{"another agent's id", &plumblinev1.WatchPolicyRequest{AgentId: "db2"}, "db2"},
	} {
		_, err := c.WatchPolicy(ctxT(t), tc.req)
		code := codes.InvalidArgument
		if tc.name == "another agent's id" {
			code = codes.PermissionDenied
		}
		wantCode(t, "WatchPolicy "+tc.name, err, code, tc.want)
	}
	if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, Labels: map[string]string{"": "x"}}); err == nil {
		t.Error("Hello with an empty label key accepted")
	}
}

func waitReport(t *testing.T, svc *Service, host string, ok func(policy.Report) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		reps, err := svc.PolicyReports(ctxT(t), host)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reps {
			if ok(r) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report for %s", host)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Policy selects an enrolled agent by the labels of its join token over
// the labels it declares: a declared label cannot claim a policy the
// token's label does not, and a token's label selects with none declared.
func TestPolicyEnrollmentLabels(t *testing.T) {
	t.Parallel()
	src := policy.NewSource([]policy.Entry{windowEntry("pg-nightly", "postgres")})
	dsn := sqliteDSN(t)
	e := startServer(t, dsn, newPKI(t), Options{Policy: src})
	ctx := ctxT(t)
	if err := e.store.CreateJoinToken(ctx, store.JoinToken{ID: "tok", SecretHash: "h", Labels: map[string]string{"role": "mysql", "team": "payments"},
		MaxUses: 2, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.EnrollAgent(ctx, store.Enrollment{TokenID: "tok", SecretHash: "h", AgentID: "db1", Serial: "01", NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c := e.agent(t, "db1")
	hello := func(labels map[string]string) *plumblinev1.AgentPolicy {
		t.Helper()
		h, err := c.Hello(ctx, &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, AgentVersion: "1", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return h.GetPolicy()
	}
	if p := hello(map[string]string{"role": "postgres"}); len(p.GetConfigYaml()) != 0 {
		t.Errorf("agent declaring role=postgres, enrolled with role=mysql: policy %q, want none (the enrollment's label selects)", p.GetConfigYaml())
	}
	src.Update([]policy.Entry{{Name: "payments", Select: policy.Selector{Labels: map[string]string{"team": "payments", "tier": "gold"}},
		Policy: policy.Fragment{MaintenanceWindows: []maintenance.Window{{Name: "payments", Schedule: "0 3 * * *", Duration: time.Hour}}}}})
	if p := hello(map[string]string{"tier": "gold"}); !strings.Contains(string(p.GetConfigYaml()), "payments") {
		t.Errorf("enrolled team=payments, declared tier=gold: policy %q, want the payments entry (both label sources select together)", p.GetConfigYaml())
	}
	if p := hello(nil); len(p.GetConfigYaml()) != 0 {
		t.Errorf("enrolled team=payments, nothing declared: policy %q, want none (tier=gold is missing)", p.GetConfigYaml())
	}
}

// The policy API resolves an enrolled agent's policy with the labels its
// join token gave it, as Hello and WatchPolicy do: an agent that runs the
// policy its token's label selects, declaring no label itself, is in
// sync, and the API names that policy.
func TestPolicyAPIEnrollmentLabels(t *testing.T) {
	t.Parallel()
	src := policy.NewSource([]policy.Entry{windowEntry("pg-nightly", "postgres")})
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Policy: src})
	ctx := ctxT(t)
	if err := e.store.CreateJoinToken(ctx, store.JoinToken{ID: "tok", SecretHash: "h", Labels: map[string]string{"role": "postgres"},
		MaxUses: 1, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.EnrollAgent(ctx, store.Enrollment{TokenID: "tok", SecretHash: "h", AgentID: "db1", Serial: "01", NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c := e.agent(t, "db1")
	h, err := c.Hello(ctx, &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, AgentVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	p := h.GetPolicy()
	if !strings.Contains(string(p.GetConfigYaml()), "pg-nightly") {
		t.Fatalf("Hello of an agent enrolled with role=postgres: policy %q, want pg-nightly", p.GetConfigYaml())
	}
	if _, err := c.WatchPolicy(ctx, &plumblinev1.WatchPolicyRequest{AgentId: "db1", Hostname: "db1", PolicyDigest: p.GetDigest(),
		Wait: durationpb.New(time.Millisecond), EffectiveConfigYaml: []byte("probes: []\n")}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(policy.Handler(src, e.svc.PolicyReports))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/hosts/db1/policy")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v policy.HostView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/hosts/db1/policy: %d %v", resp.StatusCode, err)
	}
	if len(v.Agents) != 1 {
		t.Fatalf("policy view has %d agents, want 1: %+v", len(v.Agents), v)
	}
	a := v.Agents[0]
	if !a.InSync || strings.Join(a.Central.Sources, ",") != "pg-nightly" || a.Labels["role"] != "postgres" {
		t.Errorf("agent view: in_sync %v, central sources %v, labels %v; want true, [pg-nightly], role=postgres (its token's)", a.InSync, a.Central.Sources, a.Labels)
	}
}

// Label keys are one grammar, case-insensitive: a token's "Role" fixes
// the agent's "role" (the agent cannot claim another team's policy by
// writing the key in another case), and a selector may name "Team" or
// "k8s.io/zone".
func TestPolicyLabelKeysOneGrammar(t *testing.T) {
	t.Parallel()
	src := policy.NewSource([]policy.Entry{windowEntry("pg-nightly", "postgres")})
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Policy: src})
	ctx := ctxT(t)
	// Stored as a token issued before keys were stored canonical.
	if err := e.store.CreateJoinToken(ctx, store.JoinToken{ID: "tok", SecretHash: "h", Labels: map[string]string{"Role": "mysql"},
		MaxUses: 1, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.EnrollAgent(ctx, store.Enrollment{TokenID: "tok", SecretHash: "h", AgentID: "db1", Serial: "01", NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c := e.agent(t, "db1")
	hello := func(labels map[string]string) string {
		t.Helper()
		h, err := c.Hello(ctx, &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "db1"}, AgentVersion: "1", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return string(h.GetPolicy().GetConfigYaml())
	}
	for _, declared := range []map[string]string{{"role": "postgres"}, {"ROLE": "postgres"}} {
		if p := hello(declared); p != "" {
			t.Errorf("token Role=mysql, agent declares %v: policy %q, want none (the token's key fixes the label in any case)", declared, p)
		}
	}
	src.Update([]policy.Entry{{Name: "zone-a", Select: policy.Selector{Labels: map[string]string{"Team": "payments", "k8s.io/zone": "a"}},
		Policy: policy.Fragment{MaintenanceWindows: []maintenance.Window{{Name: "zone-a", Schedule: "0 3 * * *", Duration: time.Hour}}}}})
	if p := hello(map[string]string{"team": "payments", "K8s.io/Zone": "a"}); !strings.Contains(p, "zone-a") {
		t.Errorf("selector Team=payments,k8s.io/zone=a, agent team=payments,K8s.io/Zone=a: policy %q, want the zone-a entry", p)
	}
}
