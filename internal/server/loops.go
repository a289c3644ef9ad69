package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/leader"
	"github.com/plumbline/plumbline/internal/server/retention"
	"github.com/plumbline/plumbline/internal/server/store"
)

// The background loops, by the name of their lease (leader_lease.name and
// plumbline_server_leader's loop label).
const (
	LoopEvaluator = "evaluator"
	LoopInventory = "inventory"
	LoopRetention = "retention"
	LoopJudge     = "judge"
	LoopMembers   = "members"
)

// newPruner is the retention loop over st: store.retention (0: it
// returns at once and prunes nothing).
func newPruner(st retention.Store, cfg config.Config, logger *slog.Logger) *retention.Pruner {
	return retention.New(st, retention.Options{Retention: cfg.Store.Retention, Logger: logger.With("component", "retention")})
}

// elector elects the replica that runs the background loops: through
// leases on PostgreSQL, where several replicas may share the database;
// on SQLite, one server on its own file, it leads every loop itself.
func elector(st *store.Store, cfg config.Config, logger *slog.Logger) *leader.Elector {
	opts := leader.Options{TTL: cfg.Store.LeaseTTL, Logger: logger.With("component", "leader")}
	if st.Engine() != store.Postgres {
		return leader.Local(opts)
	}
	return leader.New(st, opts)
}

// evaluators runs the baseline evaluator of every term this replica
// leads: a new one each time, which loads the detectors as the previous
// leader left them (an evaluator kept from an earlier term would write
// its stale detectors back). Its status adds up the terms.
type evaluators struct {
	st   evaluator.Store
	opts evaluator.Options

	mu   sync.Mutex
	cur  *evaluator.Evaluator // nil between terms
	past evaluator.Status     // the terms that ended
}

// newEvaluators checks opts by building a first evaluator.
func newEvaluators(st evaluator.Store, opts evaluator.Options) (*evaluators, error) {
	if _, err := evaluator.New(st, opts); err != nil {
		return nil, err
	}
	return &evaluators{st: st, opts: opts}, nil
}

// run is the loop of one term: until ctx (the term) is done.
func (e *evaluators) run(ctx context.Context) {
	ev, err := evaluator.New(e.st, e.opts)
	if err != nil { // checked by newEvaluators
		e.opts.Logger.Error("evaluator", "err", err)
		return
	}
	e.mu.Lock()
	e.cur = ev
	e.mu.Unlock()
	ev.Run(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.past = addStatus(e.past, ev.Status())
	e.cur = nil
}

// status is the evaluators' status over every term.
func (e *evaluators) status() evaluator.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return e.past
	}
	return addStatus(e.past, e.cur.Status())
}

func addStatus(a, b evaluator.Status) evaluator.Status {
	a.Passes += b.Passes
	a.Failures += b.Failures
	a.Runs += b.Runs
	if b.LastSuccess.After(a.LastSuccess) {
		a.LastSuccess = b.LastSuccess
	}
	return a
}

// appendFamilies serves h and then the families of g in the format h
// chose (text or delimited protobuf; a second gzip member when h
// compressed), so that the server's own gauges (the election's) join the
// exporter's exposition without the exporter knowing them.
func appendFamilies(h http.Handler, g prometheus.Gatherer, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		body := rec.body.Bytes()
		format := expfmt.ResponseFormat(rec.header)
		if rec.status == http.StatusOK && (format.FormatType() == expfmt.TypeTextPlain || format.FormatType() == expfmt.TypeProtoDelim) {
			if more, err := encodeFamilies(g, format, rec.header.Get("Content-Encoding") == "gzip"); err != nil {
				logger.Error("encode the server's own metrics", "err", err)
			} else {
				body = append(body, more...)
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.status)
		w.Write(body)
	})
}

func encodeFamilies(g prometheus.Gatherer, format expfmt.Format, gz bool) ([]byte, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	enc := expfmt.NewEncoder(&raw, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if !gz {
		return raw.Bytes(), nil
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// recorder holds a response until appendFamilies has added to it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
