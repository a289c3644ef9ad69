package agent

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/dbio"
	"github.com/plumbline/plumbline/internal/ctxtime"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// dbMetrics are the database sources' own metrics.
type dbMetrics struct {
	up       *prometheus.GaugeVec   // source
	samples  *prometheus.CounterVec // source, result
	duration *prometheus.GaugeVec   // source
}

func newDBMetrics(reg prometheus.Registerer) *dbMetrics {
	const ns = "plumbline_agent_database_"
	m := &dbMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ns + "up",
			Help: "1 when the last sample of the database source (its name in databases) read its statistics, 0 when it failed (the agent's log says why)."}, []string{"source"}),
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "samples_total",
			Help: "Samples of a database source's I/O statistics by result: sent (an interval was spooled), first (the first sample after a start or an error: no interval yet), dropped (a counter went backwards: a statistics reset or restart), error."}, []string{"source", "result"}),
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ns + "sample_duration_seconds",
			Help: "How long the last sample of a database source took (connecting included), in seconds."}, []string{"source"}),
	}
	reg.MustRegister(m.up, m.samples, m.duration)
	return m
}

// databaseLoop runs one goroutine per configured database source (the
// effective configuration's databases), restarting a source whose
// settings changed (central policy) and stopping those that are gone; it
// checks the configuration every poll.
func (a *Agent) databaseLoop(ctx context.Context, poll time.Duration) {
	type running struct {
		cfg    config.DatabaseSource
		cancel context.CancelFunc
		done   chan struct{}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	byName := map[string]running{}
	update := func() {
		want := map[string]config.DatabaseSource{}
		for _, s := range a.eff.Load().cfg.Databases {
			want[s.Name] = s
		}
		for name, r := range byName {
			if w, ok := want[name]; !ok || !reflect.DeepEqual(w, r.cfg) {
				r.cancel()
				<-r.done // its last sample is over: nothing sets its gauge after this
				delete(byName, name)
				a.db.up.DeleteLabelValues(name)
				a.db.duration.DeleteLabelValues(name)
			}
		}
		for name, s := range want {
			if _, ok := byName[name]; ok {
				continue
			}
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			byName[name] = running{cfg: s, cancel: cancel, done: done}
			wg.Go(func() {
				defer close(done)
				a.databaseSource(sctx, s)
			})
		}
	}
	update()
	ctxtime.Every(ctx, poll, func(context.Context) { update() })
}

// databaseSource samples one source every cfg.Every until ctx ends, and
// spools each interval as a DatabaseIO record placed on the volumes of
// the last geometry discovery.
func (a *Agent) databaseSource(ctx context.Context, cfg config.DatabaseSource) {
	log := a.log.With("database", cfg.Name, "engine", cfg.Engine, "address", cfg.Address)
	src, err := dbio.NewSource(cfg, nil)
	if err != nil {
		log.Error("database source not started", "err", err)
		return
	}
	defer src.Close()
	log.Info("database source started", "every", cfg.Every, "timeout", cfg.Timeout)
	var lastErr string
	var lastGaps []string
	step := func() {
		start := time.Now()
		d, ok, err := src.Step(ctx)
		a.db.duration.WithLabelValues(cfg.Name).Set(time.Since(start).Seconds())
		if ctx.Err() != nil {
			return
		}
		result := a.databaseResult(log, cfg.Name, err, ok, &lastErr)
		a.db.samples.WithLabelValues(cfg.Name, result).Inc()
		if result != "sent" {
			return
		}
		m := a.dbMounts.Load()
		if m == nil {
			m = &dbio.Mounts{}
		}
		rec := dbio.Record(cfg.Name, d, dbio.NewAttributor(*m, nil).WithRoot(cfg.Root))
		a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_DatabaseIo{DatabaseIo: rec}})
		if gaps := databaseGaps(rec); !slices.Equal(gaps, lastGaps) {
			lastGaps = gaps
			if len(gaps) > 0 {
				log.Warn("database I/O partly not measured or not placed on a volume", "gaps", gaps)
			} else {
				log.Info("database I/O measured and placed on volumes")
			}
		}
	}
	step()
	ctxtime.Every(ctx, cfg.Every, func(context.Context) { step() })
}

// databaseGaps are what a record says it could not measure or place, as
// the log states them: logged when they change, not every interval.
func databaseGaps(rec *plumblinev1.DatabaseIO) []string {
	var gaps []string
	for _, set := range rec.GetSets() {
		if w := set.GetAttribution(); w != "" {
			gaps = append(gaps, set.GetLocation()+" "+set.GetPath()+": "+w)
		}
		for _, op := range set.GetOps() {
			if why := op.GetNotMeasured(); why != "" {
				gaps = append(gaps, set.GetLocation()+" "+op.GetOp()+" not measured: "+why)
			}
		}
	}
	for _, u := range rec.GetUnknown() {
		gaps = append(gaps, u.GetField()+": "+u.GetReason())
	}
	slices.Sort(gaps)
	return slices.Compact(gaps)
}

// databaseResult logs a sample's outcome when it differs from the last
// one's, sets the source's up gauge and names the outcome for the samples
// metric.
func (a *Agent) databaseResult(log *slog.Logger, name string, err error, ok bool, lastErr *string) string {
	up := a.db.up.WithLabelValues(name)
	switch {
	case errors.Is(err, dbio.ErrBackwards):
		up.Set(1)
		*lastErr = ""
		log.Info("database interval dropped", "err", err)
		return "dropped"
	case err != nil:
		up.Set(0)
		if err.Error() != *lastErr {
			log.Warn("database statistics not read", "err", err)
		}
		*lastErr = err.Error()
		return "error"
	}
	up.Set(1)
	if *lastErr != "" {
		log.Info("database statistics read again")
		*lastErr = ""
	}
	if !ok {
		return "first"
	}
	return "sent"
}
