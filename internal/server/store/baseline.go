package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ProbeRun is a stored probe result with the agent and sequence it came with.
type ProbeRun struct {
	AgentID  string
	Sequence uint64
	ProbeResult
}

// ProbeBaseline is the evaluator's state of one volume and probe kind
// (table baseline_states): the baseline.Detector bytes, the outcome of its
// last run and cumulative probe statistics.
type ProbeBaseline struct {
	AgentID    string
	MountPoint string
	Kind       string
	// Profile is the baseline.Profile key the last run was judged in.
	Profile string
	// Detector is baseline.Detector.MarshalBinary.
	Detector []byte
	// Status, Reference, Ratio and Since are the baseline.State.
	Status    string
	Reference string
	Ratio     float64
	Since     time.Time
	// HistoryRatio is the last run against the volume's history (0 while
	// the history is not trusted); CohortRatio against the cohort or, when
	// the cohort is too small, the prior — CohortReference says which
	// ("cohort", "prior", or "" when neither was available).
	HistoryRatio    float64
	CohortRatio     float64
	CohortReference string
	HistoryMedian   float64 // seconds
	Trusted         bool
	// LastRun is when the last run with completed operations started.
	LastRun time.Time
	// Runs counts the runs judged.
	Runs uint64
	// Histogram is the plumbline.v1.Histogram of every judged run, merged.
	Histogram []byte
	// Signal is the baseline.Signal the state is about and Detail its
	// State.Detail; TailRatio, MeanRatio and RateRatio the last run's p99,
	// mean and rate shortfall over their histories (0: not trusted or not
	// carried).
	Signal, Detail                  string
	TailRatio, MeanRatio, RateRatio float64
	// DeviceHistory is the evaluator's history of the device's operations
	// per second in the busy guard's window before the kind's runs that
	// ran (nil: none yet).
	DeviceHistory []byte
}

// StopCount counts probe runs of one volume and kind that were skipped or
// stopped early for one reason.
type StopCount struct {
	AgentID    string
	MountPoint string
	Kind       string
	Reason     string
	Runs       uint64
}

// ProbeFailing is a volume and kind whose latest probe runs were refused or
// failed (stopped reason refused, failed): since the first run of the
// streak, with the latest run's reason and message (table probe_failing).
type ProbeFailing struct {
	AgentID    string
	MountPoint string
	Kind       string
	Reason     string
	Failure    string
	Since      time.Time // the first refused or failed run of the streak started
	Last       time.Time // the latest one started
	Runs       uint64    // runs in the streak
}

// ProbeKey names one volume and probe kind.
type ProbeKey struct {
	AgentID    string
	MountPoint string
	Kind       string
}

// Cohort is the summary of one profile's cohort for one probe kind.
type Cohort struct {
	Profile string
	Kind    string
	Volumes int
	Median  float64 // seconds
	MAD     float64 // seconds
}

// BaselineUpdate is what one evaluator pass writes, in one transaction.
type BaselineUpdate struct {
	// States replace the stored rows of the same volume and kind.
	States []ProbeBaseline
	// StopCounts are added to the stored counts.
	StopCounts []StopCount
	// Watermarks move each agent's evaluated_through forward (never back).
	Watermarks map[string]uint64
	// Cohorts, when not nil, replace every stored cohort.
	Cohorts []Cohort
	// Recovered end the failing streaks of these volumes and kinds (a run
	// did I/O); applied before Failing.
	Recovered []ProbeKey
	// Failing extend (or start) failing streaks: a stored streak keeps its
	// Since and adds Runs; Reason, Failure and Last are replaced.
	Failing []ProbeFailing
}

// PendingProbeRuns returns up to limit probe results the evaluator has not
// judged yet, by agent and sequence: those above the agent's watermark and
// at or below its dedup high-water mark, below which no late record can
// still arrive.
func (s *Store) PendingProbeRuns(ctx context.Context, limit int) ([]ProbeRun, error) {
	return queryAll(ctx, s, "pending probe runs", `
SELECT p.agent_id, p.sequence, p.mount_point, p.device, p.kind, p.block_size_bytes, p.queue_depth,
    p.started_ns, p.duration_ns, p.ops, p.errors, p.bytes, p.skipped, p.stopped_reason, p.failure, p.latency_histogram, p.iops_cap, p.array_activity,
    p.busy_window_ns, p.busy_ios, p.busy_sectors, p.busy_ticks_ns, p.busy_queue_ns
FROM probe_results p
JOIN agents a ON a.agent_id = p.agent_id
LEFT JOIN baseline_watermarks w ON w.agent_id = p.agent_id
WHERE p.sequence > COALESCE(w.evaluated_through, 0) AND p.sequence <= a.high_water
ORDER BY p.agent_id, p.sequence
LIMIT ?`, []any{limit}, func(row rowScanner) (ProbeRun, error) {
		var r ProbeRun
		var seq, bs, qd, started, dur, ops, errs, bytes int64
		var bWin, bIOs, bSectors, bTicks, bQueue int64
		var arrays []byte
		if err := row.Scan(&r.AgentID, &seq, &r.MountPoint, &r.Device, &r.Kind, &bs, &qd,
			&started, &dur, &ops, &errs, &bytes, &r.Skipped, &r.StoppedReason, &r.Failure, &r.Histogram, &r.IOPSCap, &arrays,
			&bWin, &bIOs, &bSectors, &bTicks, &bQueue); err != nil {
			return r, err
		}
		r.BusyIO = DeviceActivity{Window: time.Duration(bWin), IOs: uint64(bIOs), Sectors: uint64(bSectors),
			IOTicks: time.Duration(bTicks), TimeInQueue: time.Duration(bQueue)}
		var err error
		if r.ArrayActivity, err = decodeArrayActivity(arrays); err != nil {
			return r, err
		}
		r.Sequence, r.BlockSizeBytes, r.QueueDepth = uint64(seq), uint32(bs), uint32(qd)
		r.StartedAt, r.Duration = fromUnixNano(started), time.Duration(dur)
		r.Ops, r.Errors, r.Bytes = uint64(ops), uint64(errs), uint64(bytes)
		return r, nil
	})
}

// SaveBaselines writes one evaluator pass atomically.
func (s *Store) SaveBaselines(ctx context.Context, u BaselineUpdate) error {
	for _, st := range u.States {
		if st.AgentID == "" || st.MountPoint == "" || st.Kind == "" {
			return fmt.Errorf("save baselines: %w: state without agent, mount point or kind", ErrInvalid)
		}
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.putStates(ctx, tx, u.States); err != nil {
			return err
		}
		for _, c := range u.StopCounts {
			if c.Runs == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO probe_stop_counts (agent_id, mount_point, kind, reason, runs) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point, kind, reason) DO UPDATE SET runs = probe_stop_counts.runs + excluded.runs`),
				c.AgentID, c.MountPoint, c.Kind, c.Reason, int64(c.Runs)); err != nil {
				return fmt.Errorf("stop counts: %w", err)
			}
		}
		for _, k := range u.Recovered {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM probe_failing WHERE agent_id = ? AND mount_point = ? AND kind = ?`),
				k.AgentID, k.MountPoint, k.Kind); err != nil {
				return fmt.Errorf("probe failing: %w", err)
			}
		}
		for _, f := range u.Failing {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO probe_failing (agent_id, mount_point, kind, reason, failure, since_ns, last_ns, runs) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point, kind) DO UPDATE SET reason = excluded.reason, failure = excluded.failure,
    last_ns = excluded.last_ns, runs = probe_failing.runs + excluded.runs`),
				f.AgentID, f.MountPoint, f.Kind, f.Reason, f.Failure, unixNano(f.Since), unixNano(f.Last), int64(f.Runs)); err != nil {
				return fmt.Errorf("probe failing: %w", err)
			}
		}
		agents := make([]string, 0, len(u.Watermarks))
		for a := range u.Watermarks {
			agents = append(agents, a)
		}
		slices.Sort(agents) // a fixed lock order across concurrent writers
		for _, a := range agents {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO baseline_watermarks (agent_id, evaluated_through) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET evaluated_through = CASE
    WHEN baseline_watermarks.evaluated_through < excluded.evaluated_through THEN excluded.evaluated_through
    ELSE baseline_watermarks.evaluated_through END`), a, int64(u.Watermarks[a])); err != nil {
				return fmt.Errorf("watermark of %q: %w", a, err)
			}
		}
		if u.Cohorts != nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM baseline_cohorts`); err != nil {
				return fmt.Errorf("cohorts: %w", err)
			}
			for chunk := range slices.Chunk(u.Cohorts, rowsPerInsert) {
				var b strings.Builder
				b.WriteString(`INSERT INTO baseline_cohorts (profile, kind, volumes, median, mad) VALUES `)
				args := make([]any, 0, len(chunk)*5)
				b.WriteString(tupleList("(?, ?, ?, ?, ?)", len(chunk)))
				for _, c := range chunk {
					args = append(args, c.Profile, c.Kind, int64(c.Volumes), c.Median, c.MAD)
				}
				if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
					return fmt.Errorf("cohorts: %w", err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save baselines: %w", err)
	}
	return nil
}

func (s *Store) putStates(ctx context.Context, tx *sql.Tx, states []ProbeBaseline) error {
	for chunk := range slices.Chunk(states, rowsPerInsert) {
		var b strings.Builder
		b.WriteString(`INSERT INTO baseline_states (agent_id, mount_point, kind, profile, detector, status, reference, ratio,
    since_ns, history_ratio, cohort_ratio, cohort_reference, history_median, trusted, last_run_ns, runs, latency_histogram,
    signal, detail, p99_ratio, mean_ratio, rate_ratio, device_history) VALUES `)
		args := make([]any, 0, len(chunk)*23)
		b.WriteString(tupleList("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", len(chunk)))
		for _, st := range chunk {
			det, hist := st.Detector, st.Histogram
			if det == nil {
				det = []byte{}
			}
			if hist == nil {
				hist = []byte{}
			}
			args = append(args, st.AgentID, st.MountPoint, st.Kind, st.Profile, det, st.Status, st.Reference, st.Ratio,
				unixNano(st.Since), st.HistoryRatio, st.CohortRatio, st.CohortReference, st.HistoryMedian, st.Trusted,
				unixNano(st.LastRun), int64(st.Runs), hist, signalOrMedian(st.Signal), st.Detail, st.TailRatio, st.MeanRatio, st.RateRatio,
				append([]byte{}, st.DeviceHistory...))
		}
		b.WriteString(` ON CONFLICT (agent_id, mount_point, kind) DO UPDATE SET
    profile = excluded.profile, detector = excluded.detector, status = excluded.status, reference = excluded.reference,
    ratio = excluded.ratio, since_ns = excluded.since_ns, history_ratio = excluded.history_ratio,
    cohort_ratio = excluded.cohort_ratio, cohort_reference = excluded.cohort_reference,
    history_median = excluded.history_median, trusted = excluded.trusted, last_run_ns = excluded.last_run_ns,
    runs = excluded.runs, latency_histogram = excluded.latency_histogram, signal = excluded.signal,
    detail = excluded.detail, p99_ratio = excluded.p99_ratio, mean_ratio = excluded.mean_ratio, rate_ratio = excluded.rate_ratio,
    device_history = excluded.device_history`)
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("baseline states: %w", err)
		}
	}
	return nil
}

// ListProbeBaselines returns every stored baseline state, by agent, mount point
// and kind.
func (s *Store) ListProbeBaselines(ctx context.Context) ([]ProbeBaseline, error) {
	return queryAll(ctx, s, "list baselines", `
SELECT agent_id, mount_point, kind, profile, detector, status, reference, ratio, since_ns, history_ratio,
    cohort_ratio, cohort_reference, history_median, trusted, last_run_ns, runs, latency_histogram,
    signal, detail, p99_ratio, mean_ratio, rate_ratio, device_history
FROM baseline_states ORDER BY agent_id, mount_point, kind`, nil, func(row rowScanner) (ProbeBaseline, error) {
		var st ProbeBaseline
		var since, last, runs int64
		if err := row.Scan(&st.AgentID, &st.MountPoint, &st.Kind, &st.Profile, &st.Detector, &st.Status, &st.Reference,
			&st.Ratio, &since, &st.HistoryRatio, &st.CohortRatio, &st.CohortReference, &st.HistoryMedian, &st.Trusted,
			&last, &runs, &st.Histogram, &st.Signal, &st.Detail, &st.TailRatio, &st.MeanRatio, &st.RateRatio, &st.DeviceHistory); err != nil {
			return st, err
		}
		st.Since, st.LastRun, st.Runs = fromUnixNano(since), fromUnixNano(last), uint64(runs)
		return st, nil
	})
}

// ListStopCounts returns every stop count, by agent, mount point, kind and reason.
func (s *Store) ListStopCounts(ctx context.Context) ([]StopCount, error) {
	return queryAll(ctx, s, "list stop counts", `
SELECT agent_id, mount_point, kind, reason, runs FROM probe_stop_counts
ORDER BY agent_id, mount_point, kind, reason`, nil, func(row rowScanner) (StopCount, error) {
		var c StopCount
		var n int64
		if err := row.Scan(&c.AgentID, &c.MountPoint, &c.Kind, &c.Reason, &n); err != nil {
			return c, err
		}
		c.Runs = uint64(n)
		return c, nil
	})
}

// ListCohorts returns the cohorts of the last evaluator pass, by profile and kind.
func (s *Store) ListCohorts(ctx context.Context) ([]Cohort, error) {
	return queryAll(ctx, s, "list cohorts", `SELECT profile, kind, volumes, median, mad FROM baseline_cohorts ORDER BY profile, kind`, nil, func(row rowScanner) (Cohort, error) {
		var c Cohort
		var n int64
		if err := row.Scan(&c.Profile, &c.Kind, &n, &c.Median, &c.MAD); err != nil {
			return c, err
		}
		c.Volumes = int(n)
		return c, nil
	})
}

// ListProbeFailing returns every failing streak, by agent, mount point and
// kind.
func (s *Store) ListProbeFailing(ctx context.Context) ([]ProbeFailing, error) {
	return queryAll(ctx, s, "list probe failing", `
SELECT agent_id, mount_point, kind, reason, failure, since_ns, last_ns, runs FROM probe_failing
ORDER BY agent_id, mount_point, kind`, nil, func(row rowScanner) (ProbeFailing, error) {
		var f ProbeFailing
		var since, last, n int64
		if err := row.Scan(&f.AgentID, &f.MountPoint, &f.Kind, &f.Reason, &f.Failure, &since, &last, &n); err != nil {
			return f, err
		}
		f.Since, f.Last, f.Runs = fromUnixNano(since), fromUnixNano(last), uint64(n)
		return f, nil
	})
}

// signalOrMedian: a state written without a signal is about the median.
func signalOrMedian(s string) string {
	if s == "" {
		return "median"
	}
	return s
}
