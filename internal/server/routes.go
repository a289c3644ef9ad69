package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/plumbline/plumbline/internal/server/inventory"
)

// Route is one path the web listener serves: its net/http pattern and
// the methods it answers (GET includes HEAD).
type Route struct {
	Pattern string
	Methods []string
}

// webMux is the web listener's router. It answers like a well-behaved
// API: on the protected prefixes (/api/, /metrics) a missing or wrong
// token is 401 before anything else, an unknown path then 404; a known
// path asked with another method is 405 with an Allow header. Every
// route it serves is listed by Routes (api/openapi.yaml must describe
// each; a test holds it).
type webMux struct {
	mux    *http.ServeMux
	tokens []inventory.Token
	routes []Route
}

func newWebMux(tokens []inventory.Token) *webMux {
	return &webMux{mux: http.NewServeMux(), tokens: tokens}
}

// handle serves pattern with h for methods; protected routes need the
// API's token first.
func (m *webMux) handle(pattern string, protected bool, h http.Handler, methods ...string) {
	m.routes = append(m.routes, Route{Pattern: pattern, Methods: methods})
	h = allowMethods(methods, h)
	if protected {
		h = inventory.RequireToken(m.tokens, h)
	}
	m.mux.Handle(pattern, h)
}

// fallback serves every other path with api (the inventory API), whose
// own routes it lists, and answers 401 before 404 under /metrics/.
func (m *webMux) fallback(api *inventory.API) {
	for _, p := range api.Routes() {
		m.routes = append(m.routes, Route{Pattern: p, Methods: []string{http.MethodGet}})
	}
	m.mux.Handle("/metrics/", inventory.RequireToken(m.tokens, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, "not found: "+r.URL.Path)
	})))
	m.mux.Handle("/", api)
}

// Routes are the routes served, in the order they were added.
func (m *webMux) Routes() []Route { return slices.Clone(m.routes) }

func (m *webMux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// allowMethods answers 405 with an Allow header to a method not in
// methods (GET allows HEAD too).
func allowMethods(methods []string, h http.Handler) http.Handler {
	allowed := slices.Clone(methods)
	if slices.Contains(allowed, http.MethodGet) && !slices.Contains(allowed, http.MethodHead) {
		allowed = append(allowed, http.MethodHead)
	}
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(allowed, r.Method) {
			w.Header().Set("Allow", allow)
			writeHTTPError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: use %s", r.Method, strings.Join(methods, " or ")))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// writeHTTPError writes the API's JSON error body.
func writeHTTPError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
