package policy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Report is what one agent last told the server about its policy.
type Report struct {
	AgentID  string `json:"agent_id"`
	Hostname string `json:"hostname"`
	// Labels are the labels policy selects the agent by: those its join
	// token gave it at enrollment over those it declares.
	Labels map[string]string `json:"labels"`
	// Effective is the agent's effective configuration (YAML) and
	// AppliedDigest the central policy's digest it runs with (hex).
	Effective     string    `json:"effective_config,omitempty"`
	AppliedDigest string    `json:"applied_digest,omitempty"`
	At            time.Time `json:"reported_at"`
}

// ReportLister returns the reports of the agents whose host name or agent
// id is host (the server's store: ingest.Service.PolicyReports).
type ReportLister func(ctx context.Context, host string) ([]Report, error)

// HostView is GET /api/v1/hosts/{host}/policy: for each agent of the host
// that reported its policy, its labels, the central policy that resolves
// for it and the effective configuration it reported; with no such agent,
// the central policy for the host name alone (labels unknown).
type HostView struct {
	Host   string      `json:"host"`
	Agents []AgentView `json:"agents"`
	// Central is the policy for the host name without labels, when no
	// agent of the host has reported its policy.
	Central *CentralView `json:"central,omitempty"`
}

// AgentView is one agent's policy.
type AgentView struct {
	Report
	Central CentralView `json:"central"`
	// InSync: the agent runs with the central policy the server holds now.
	InSync bool `json:"in_sync"`
}

// CentralView is a resolved central policy.
type CentralView struct {
	Sources []string `json:"sources"`
	Digest  string   `json:"digest,omitempty"`
	YAML    string   `json:"policy_yaml,omitempty"`
}

func centralView(r Resolved) CentralView {
	return CentralView{Sources: r.Sources, Digest: hex.EncodeToString(r.Digest), YAML: string(r.YAML)}
}

// Handler serves GET /api/v1/hosts/{host}/policy and GET /api/v1/policies
// (the configured entries). Authentication is the caller's (the server
// wraps it in the inventory API's token check).
func Handler(src *Source, reports ReportLister) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/hosts/{host}/policy", func(w http.ResponseWriter, r *http.Request) {
		host := r.PathValue("host")
		if host == "" || len(host) > 256 || strings.ContainsAny(host, "/\x00") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "host: want a host name or agent id"})
			return
		}
		v := HostView{Host: host, Agents: []AgentView{}}
		reps, err := reports(r.Context(), host)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		for _, rep := range reps {
			res, _, err := src.Resolve(Facts{Hostname: rep.Hostname, Labels: rep.Labels})
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			v.Agents = append(v.Agents, AgentView{Report: rep, Central: centralView(res), InSync: rep.AppliedDigest == hex.EncodeToString(res.Digest)})
		}
		if len(v.Agents) == 0 {
			res, _, err := src.Resolve(Facts{Hostname: host})
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			c := centralView(res)
			v.Central = &c
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /api/v1/policies", func(w http.ResponseWriter, r *http.Request) {
		entries, _ := src.Entries()
		out := []entryView{}
		for _, e := range entries {
			b, err := MarshalYAML(e.Policy)
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			out = append(out, entryView{Name: e.Name, Select: e.Select, YAML: string(b)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"policies": out})
	})
	return mux
}

// entryView is one configured entry in GET /api/v1/policies.
type entryView struct {
	Name   string   `json:"name"`
	Select Selector `json:"select"`
	YAML   string   `json:"policy_yaml"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
