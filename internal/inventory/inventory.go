// Package inventory is the server's HTTP JSON read path:
//
//	GET /api/v1/hosts    {"hosts": [{"agent_id": ..., "hostname": ..., ...}]}
//	GET /api/v1/volumes  {"volumes": [{"host": ..., "mount_point": ..., "filesystem": ...,
//	                                   "layers": [...], "alignment": {...}, ...}]}
//	GET /healthz         200 while the process serves
//	GET /readyz          200 when the store answers, 503 otherwise
//
// A volume has the shape `agent inspect --format json` prints for it
// (render.JSON of the plumbline.v1.Volume, with the server's alignment
// verdict) plus host, agent_id, sequence and observed_at. Errors are JSON
// too: {"error": "..."} with the HTTP status.
//
// Filters, CSV, paging and an OpenAPI description come with the inventory
// issue.
package inventory

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/render"
	"github.com/plumbline/plumbline/internal/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Store is what the API reads.
type Store interface {
	ListHosts(ctx context.Context) ([]store.Agent, error)
	ListVolumes(ctx context.Context) ([]store.Volume, error)
	// SchemaVersion doubles as the readiness probe: it needs a round trip
	// to the database.
	SchemaVersion(ctx context.Context) (int64, error)
}

var _ Store = (*store.Store)(nil)

// Options configure the API.
type Options struct {
	// BearerToken, when set, is required on /api/ requests as
	// "Authorization: Bearer <token>". /healthz and /readyz stay open.
	BearerToken string
	Logger      *slog.Logger
	// ReadyTimeout bounds the /readyz store check (default 2s).
	ReadyTimeout time.Duration
}

// API serves the inventory. Build it with New.
type API struct {
	st   Store
	opts Options
	mux  *http.ServeMux
}

// New returns the API over st.
func New(st Store, opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Second
	}
	a := &API{st: st, opts: opts, mux: http.NewServeMux()}
	a.mux.HandleFunc("/api/v1/hosts", a.get(a.auth(a.hosts)))
	a.mux.HandleFunc("/api/v1/volumes", a.get(a.auth(a.volumes)))
	a.mux.HandleFunc("/api/", a.auth(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API endpoint %s", r.URL.Path))
	}))
	a.mux.HandleFunc("/healthz", a.get(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	a.mux.HandleFunc("/readyz", a.get(a.ready))
	a.mux.HandleFunc("/{$}", a.get(a.index))
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("not found: %s", r.URL.Path))
	})
	return a
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// get answers 405 (as JSON) to everything but GET and HEAD.
func (a *API) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: use GET", r.Method))
			return
		}
		h(w, r)
	}
}

func (a *API) auth(h http.HandlerFunc) http.HandlerFunc {
	if a.opts.BearerToken == "" {
		return h
	}
	want := []byte("Bearer " + a.opts.BearerToken)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="plumbline"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h(w, r)
	}
}

func (a *API) index(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"service":   "plumbline server",
		"endpoints": []string{"/api/v1/hosts", "/api/v1/volumes", "/healthz", "/readyz"},
	})
}

func (a *API) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.ReadyTimeout)
	defer cancel()
	if _, err := a.st.SchemaVersion(ctx); err != nil {
		a.opts.Logger.Warn("readiness check failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "store unreachable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Host is one entry of /api/v1/hosts.
type Host struct {
	AgentID      string    `json:"agent_id"`
	Hostname     string    `json:"hostname"`
	OS           string    `json:"os"`
	Kernel       string    `json:"kernel"`
	MachineID    string    `json:"machine_id"`
	AgentVersion string    `json:"agent_version"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	// HighWaterSequence is the agent's dedup high-water mark.
	HighWaterSequence uint64 `json:"high_water_sequence"`
}

func (a *API) hosts(w http.ResponseWriter, r *http.Request) {
	agents, err := a.st.ListHosts(r.Context())
	if err != nil {
		a.internal(w, err)
		return
	}
	out := make([]Host, 0, len(agents))
	for _, ag := range agents {
		out = append(out, Host{
			AgentID: ag.ID, Hostname: ag.Hostname, OS: ag.OS, Kernel: ag.Kernel, MachineID: ag.MachineID,
			AgentVersion: ag.AgentVersion, FirstSeen: ag.FirstSeen, LastSeen: ag.LastSeen, HighWaterSequence: ag.HighWater,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": out})
}

func (a *API) volumes(w http.ResponseWriter, r *http.Request) {
	vols, err := a.st.ListVolumes(r.Context())
	if err != nil {
		a.internal(w, err)
		return
	}
	out := make([]map[string]any, 0, len(vols))
	for _, v := range vols {
		obj, err := volumeJSON(v)
		if err != nil {
			a.internal(w, err)
			return
		}
		out = append(out, obj)
	}
	writeJSON(w, http.StatusOK, map[string]any{"volumes": out})
}

// volumeJSON is the volume as `agent inspect --format json` prints it, plus
// where it lives and which record set it.
func volumeJSON(v store.Volume) (map[string]any, error) {
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(v.Geometry, &pv); err != nil {
		return nil, fmt.Errorf("volume %s:%s: stored geometry: %w", v.Hostname, v.MountPoint, err)
	}
	b, err := render.JSON(&pv)
	if err != nil {
		return nil, fmt.Errorf("volume %s:%s: %w", v.Hostname, v.MountPoint, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep 64-bit integers exact
	obj := map[string]any{}
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("volume %s:%s: %w", v.Hostname, v.MountPoint, err)
	}
	obj["host"] = v.Hostname
	obj["agent_id"] = v.AgentID
	obj["mount_point"] = v.MountPoint
	obj["sequence"] = v.Sequence
	if !v.ObservedAt.IsZero() {
		obj["observed_at"] = v.ObservedAt.UTC().Format(time.RFC3339Nano)
	}
	return obj, nil
}

func (a *API) internal(w http.ResponseWriter, err error) {
	a.opts.Logger.Error("inventory API", "err", err)
	writeError(w, http.StatusInternalServerError, "internal error (see the server log)")
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"error": "encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
