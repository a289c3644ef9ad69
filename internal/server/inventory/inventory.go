// Package inventory is the server's HTTP JSON inventory API:
//
//	GET /api/v1/volumes            filtered, sorted, paged volumes (JSON or CSV)
//	GET /api/v1/volumes/{id}       one volume, its latest probes, baseline state and geometry history
//	GET /api/v1/hosts              paged hosts with volume counts (JSON or CSV)
//	GET /api/v1/hosts/{host}       one host (agent id or hostname) and its volumes
//	GET /api/v1/summary            counts by verdict, profile, severity and rule; split-I/O penalty; top offenders
//	GET /api/v1/openapi.yaml       the OpenAPI 3 description of all of the above
//	GET /healthz                   200 while the process serves
//	GET /readyz                    200 when the store answers and the inventory is ready, 503 otherwise
//
// A volume has the shape `agent inspect --format json` prints for it
// (render.JSON of the plumbline.v1.Volume, with the server's alignment
// verdict) plus id, host, agent_id, sequence, observed_at and the derived
// media, profile, raid_level, severity and baseline. api/openapi.yaml is
// the contract; a test validates real responses against it.
//
// Queries run against the store's inventory tables, which the read model
// (internal/server/projection) keeps in step with the volumes table off the
// request path; summaries are read from an in-memory index the API's loop
// keeps at the store's inventory generation (see summaryCache). A request
// only reads: it never opens a write transaction, never syncs and never
// builds an index; until the first index is ready it answers 503.
// Baseline states (the evaluator's) are joined when a page is read, so
// pages show them at once.
//
// Errors are JSON: {"error": "...", "parameter": "...", "allowed": [...]};
// a bad parameter is a 400 naming it, an unknown id a 404, and no user
// input makes a 500.
package inventory

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plumbline/plumbline/api"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Store is what the API reads.
type Store interface {
	QueryVolumes(ctx context.Context, q store.VolumeQuery, fn func(*store.InventoryVolume) error) error
	InventoryVolumeByID(ctx context.Context, id string) (*store.InventoryVolume, error)
	SummarizeVolumes(ctx context.Context, f store.VolumeFilter, top int) (*store.InventorySummary, error)
	ScanSummarySnapshot(ctx context.Context, vol func(*store.SummaryRow) error, finding func(volumeID, rule, severity string) error) (gen uint64, err error)
	InventoryVolumesByIDs(ctx context.Context, ids []string) ([]*store.InventoryVolume, error)
	QueryHosts(ctx context.Context, q store.HostQuery, fn func(*store.InventoryHost) error) error
	FindHost(ctx context.Context, key string) (*store.InventoryHost, error)
	LatestProbes(ctx context.Context, agentID, mountPoint string) ([]store.ProbeResult, error)
	// SchemaVersion doubles as the readiness probe: it needs a round trip
	// to the database.
	SchemaVersion(ctx context.Context) (int64, error)
	InventoryGeneration(ctx context.Context) (uint64, error)
}

var _ Store = (*store.Store)(nil)

// Token is an API bearer token. Every token has the read-only role (the
// API has nothing else); Name is what the log says.
type Token struct {
	Name   string
	Secret string
}

// Options configure the API.
type Options struct {
	// Tokens, when any, are required on /api/ requests as
	// "Authorization: Bearer <secret>". /healthz and /readyz stay open.
	Tokens []Token
	// BearerToken is one more token (named "default").
	BearerToken string
	Logger      *slog.Logger
	// ReadyTimeout bounds the /readyz store check (default 2s).
	ReadyTimeout time.Duration
	// ReadyChecks are more checks of /readyz after the store's: the
	// first error makes it answer 503 with the error's text.
	ReadyChecks []func(context.Context) error
	// Projection is the read model the API reads from. When nil, New
	// builds one over the store (projection.Store) with SyncPeriod,
	// SyncMargin and FullSyncInterval, and Run runs its sync loop; when
	// given, its owner runs projection.Run (the API's Run only keeps its
	// summary index, and reads do not wait for that projection's first
	// sync: on a replica that does not run it, another does).
	Projection *projection.Projection
	// SyncPeriod is how often the projection syncs incrementally and Run
	// brings the summary index to the store's generation (default 2s).
	SyncPeriod time.Duration
	// ReadyWait is how long a read waits for the first summary index
	// before it answers 503 (default 5s).
	ReadyWait time.Duration
	// SyncMargin and FullSyncInterval configure the projection New
	// builds (projection.Options).
	SyncMargin       time.Duration
	FullSyncInterval time.Duration
}

// API serves the inventory. Build it with New.
type API struct {
	st     Store
	opts   Options
	mux    *http.ServeMux
	routes []string // Routes
	// proj is the read model; ownProj: New built it, Run runs its loop.
	proj    *projection.Projection
	ownProj bool

	summaries summaryCache
	// sumIdx is the summary's newest complete in-memory index (see
	// summaryIndex), nil before the first refreshIndex.
	sumIdx atomic.Pointer[summaryIndex]
	// readyCh is closed when reads can be answered (refreshIndex).
	readyCh   chan struct{}
	readyOnce sync.Once
	// lastBuild is how long the last index build took (refreshLoop).
	lastBuild atomic.Int64
	bufs      sync.Pool // *bytes.Buffer for page bodies
}

// ProjectionStore is what New needs of the store to build its own
// projection (Options.Projection nil).
type ProjectionStore interface {
	Store
	projection.Store
}

// New returns the API over st.
func New(st ProjectionStore, opts Options) *API {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	// A duration not above 0 is the default.
	opts.ReadyTimeout = cmp.Or(max(opts.ReadyTimeout, 0), 2*time.Second)
	opts.SyncPeriod = cmp.Or(max(opts.SyncPeriod, 0), 2*time.Second)
	opts.ReadyWait = cmp.Or(max(opts.ReadyWait, 0), 5*time.Second)
	if opts.BearerToken != "" {
		opts.Tokens = append(opts.Tokens, Token{Name: "default", Secret: opts.BearerToken})
	}
	a := &API{st: st, opts: opts, mux: http.NewServeMux(), proj: opts.Projection, readyCh: make(chan struct{})}
	if a.proj == nil {
		a.proj = projection.New(st, projection.Options{Logger: opts.Logger, SyncPeriod: opts.SyncPeriod,
			SyncMargin: opts.SyncMargin, FullSyncInterval: opts.FullSyncInterval,
			AfterSync: a.refreshLoop})
		a.ownProj = true
	}
	a.summaries.entries = map[string]*summaryEntry{}
	a.route("/api/v1/volumes", a.auth(a.get(a.volumes)))
	a.route("/api/v1/volumes/{id}", a.auth(a.get(a.volume)))
	a.route("/api/v1/hosts", a.auth(a.get(a.hosts)))
	a.route("/api/v1/hosts/{host}", a.auth(a.get(a.host)))
	a.route("/api/v1/summary", a.auth(a.get(a.summary)))
	a.route("/api/v1/openapi.yaml", a.auth(a.get(a.openapi)))
	a.mux.HandleFunc("/api/", a.auth(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API endpoint %s", r.URL.Path))
	}))
	a.route("/healthz", a.get(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	a.route("/readyz", a.get(a.readyz))
	a.route("/{$}", a.get(a.index))
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("not found: %s", r.URL.Path))
	})
	return a
}

// route serves pattern (GET and HEAD: every handler is wrapped in a.get)
// and lists it in Routes.
func (a *API) route(pattern string, h http.HandlerFunc) {
	a.routes = append(a.routes, pattern)
	a.mux.HandleFunc(pattern, h)
}

// Routes are the path patterns the API serves (net/http syntax; each
// answers GET and HEAD, other methods 405), without the catch-alls that
// answer 404: what api/openapi.yaml must describe.
func (a *API) Routes() []string { return slices.Clone(a.routes) }

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Run keeps the summary index and the cached summaries at the store's
// inventory generation until ctx is done (refreshIndex): every
// SyncPeriod, and when the API built its projection, after each of its
// syncs (Run runs its sync loop then: projection.Run). Requests only read
// what it built.
func (a *API) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if a.ownProj {
		wg.Go(func() { a.proj.Run(ctx) })
	}
	refresh := func(ctx context.Context) {
		if err := a.refreshLoop(ctx); err != nil && ctx.Err() == nil {
			a.opts.Logger.Warn("inventory summary index", "err", err)
		}
	}
	refresh(ctx)
	ctxtime.Every(ctx, a.opts.SyncPeriod, refresh)
}

// Sync brings the inventory tables up to date (projection.Sync) — in
// full, or only for the agents seen since the last sync (less a margin);
// the first sync is always full — and then the summary index and the
// cached summaries to the store's generation.
func (a *API) Sync(ctx context.Context, full bool) error {
	if err := a.proj.Sync(ctx, full); err != nil {
		return err
	}
	return a.refreshIndex(ctx)
}

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

// auth is RequireToken with the API's tokens.
func (a *API) auth(h http.HandlerFunc) http.HandlerFunc {
	return RequireToken(a.opts.Tokens, h).ServeHTTP
}

// RequireToken is the one bearer-token check of the server's HTTP
// listener: the inventory API and /metrics both go through it. With no
// tokens it returns h as it is; otherwise a request passes only with
// "Authorization: Bearer <secret>" of one of the tokens, and any other
// gets 401 with a WWW-Authenticate challenge. Every token compares in
// constant time, so the time taken says nothing about which one nearly
// matched.
func RequireToken(tokens []Token, h http.Handler) http.Handler {
	if len(tokens) == 0 {
		return h
	}
	wants := make([][]byte, len(tokens))
	for i, t := range tokens {
		wants[i] = []byte("Bearer " + t.Secret)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		ok := 0
		for _, want := range wants {
			ok |= subtle.ConstantTimeCompare(got, want)
		}
		if ok != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="plumbline"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *API) index(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"service": "plumbline server",
		"endpoints": []string{"/api/v1/volumes", "/api/v1/volumes/{id}", "/api/v1/hosts", "/api/v1/hosts/{host}",
			"/api/v1/summary", "/api/v1/openapi.yaml", "/healthz", "/readyz"},
	})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.ReadyTimeout)
	defer cancel()
	if _, err := a.st.SchemaVersion(ctx); err != nil {
		a.opts.Logger.Warn("readiness check failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "store unreachable")
		return
	}
	// Just after start, a moment for the first summary index (ready).
	if err := a.ready(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, errNotReady.Error())
		return
	}
	for _, check := range a.opts.ReadyChecks {
		if err := check(ctx); err != nil {
			a.opts.Logger.Warn("readiness check failed", "err", err)
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(api.OpenAPI)
}

// fail answers an error: a bad parameter is a 400 naming it, a missing
// thing a 404, a cancelled request nothing, anything else a 500 (logged).
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		body := map[string]any{"error": pe.Msg}
		if pe.Param != "" {
			body["parameter"] = pe.Param
		}
		if pe.Allowed != nil {
			body["allowed"] = pe.Allowed
		}
		writeJSON(w, http.StatusBadRequest, body)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errNotReady):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		a.opts.Logger.Error("inventory API", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error (see the server log)")
	}
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
