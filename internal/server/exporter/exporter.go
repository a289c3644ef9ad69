// Package exporter is the server's Prometheus exposition over a store
// snapshot. Families are described once; metrics are built from what the
// store holds (each volume's judged record — the server judges a volume
// once, and the exporter reads the judgement's columns, never the stored
// geometry — the evaluator's baselines, the agents' last reports), so the
// exposition is the same on every server replica.
//
// A scrape of 10,000 volumes is ~840,000 series, so each series is
// encoded once per change, in both formats (text lines, and the
// io.prometheus.client.Metric message with the native histogram buckets),
// straight from the store's rows into bytes — no dto objects — and kept
// with its sort key; a family's body is its series in key order, the
// order the client library's registry gives. Every scrape reads the
// agents (cheap). The judged records' sequences are read when an agent
// wrote since (ingest moves its last-seen time in the same transaction),
// and the judged records themselves when one moved (a newer snapshot, or
// the volume judged again under new rules); after an evaluator pass, each
// volume's count of baseline states and sum of runs tell which volumes it
// judged, and only their rows are read again; every volume's rows are read
// at least every MaxAge. Only the volumes whose rows changed are encoded
// again. A scrape that finds nothing changed is a copy of the cached body
// (text or, when Prometheus asks for it, delimited protobuf; gzip when
// accepted). Tests hold the text to expfmt's encoding and the protobuf to
// proto.Marshal's, byte for byte, and the registry's consistency checks
// to Gather.
//
// A scrape may ask for one shard of the exposition (/metrics?shard=i&shards=n,
// see shard.go): the volumes whose stable key hashes to i modulo n, and,
// in shard 0, the fleet-wide and agent series. Such a scrape reads and
// encodes again only its own volumes' baselines.
//
// Every per-volume metric carries agent_id, host and mount_point: a volume
// is its agent's (host names are labels, never keys). With default
// settings a volume costs at most 29 series in a Prometheus that ingests
// native histograms (a latency histogram is one series there) and 53 in
// one that ingests classic histograms (the coarse set: 9 series a
// histogram; the fine set, opt-in, 21): see TestSeriesPerVolume.
package exporter

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// EvaluatorStatus is what the exporter shows about the baseline evaluator.
// Passes and Failures count finished passes: when either moves, the
// baselines are read again.
type EvaluatorStatus struct {
	LastSuccess time.Time
	Passes      uint64
	Runs        uint64
	Failures    uint64
}

// Options configure a Collector. Zero fields take their defaults.
type Options struct {
	// ClassicBuckets are the classic bucket upper bounds in seconds,
	// ascending, each a schema-3 bucket bound (2^(i/8)); nil: the default,
	// CoarseClassicBuckets(); empty: none (+Inf, _sum and _count only).
	// ClassicBucketsNamed gives the named sets.
	ClassicBuckets []float64
	// AgentStaleAfter is how long after its last report and its last noted
	// connection (store.Agent.Alive) an agent counts as down (default 5m).
	AgentStaleAfter time.Duration
	// RecordCountsEvery bounds how often the records table is counted for
	// plumbline_ingest_records_total (default 1m).
	RecordCountsEvery time.Duration
	// Evaluator, when set, is asked for the evaluator's status on every
	// scrape; the baselines are read again only when its pass counts moved
	// (or MaxAge passed). Without it they are read on every scrape.
	Evaluator func() EvaluatorStatus
	// MaxAge bounds how long a read of the volumes and baselines is
	// reused when nothing signalled a change (default 30s; the server
	// passes its evaluator interval).
	MaxAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Timeout bounds the store reads of one scrape (default 20s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Store is what the exporter reads of the store: the agents, the judged
// records of their volumes, the evaluator's baselines and the record
// counts. It never reads a volume's stored geometry.
type Store interface {
	ListHosts(ctx context.Context) ([]store.Agent, error)
	RecordCounts(ctx context.Context) (map[store.RecordKind]uint64, error)
	// The judged records (store.ListJudgedVolumes): their sequences and
	// judgement times tell when to read them again.
	ListJudgedSequences(ctx context.Context) ([]store.VolumeSequence, error)
	ListJudgedVolumes(ctx context.Context) ([]store.JudgedVolume, error)
	// The evaluator's baselines and what it counted.
	ListBaselineRuns(ctx context.Context) ([]store.BaselineRuns, error)
	ListMetricsBaselines(ctx context.Context) ([]store.MetricsBaseline, error)
	ListMetricsBaselinesBetween(ctx context.Context, fromAgent, toAgent string) ([]store.MetricsBaseline, error)
	ListMetricsBaselinesOf(ctx context.Context, volumes []store.VolumeKey) ([]store.MetricsBaseline, error)
	ListStopCounts(ctx context.Context) ([]store.StopCount, error)
	ListProbeFailing(ctx context.Context) ([]store.ProbeFailing, error)
	ListCohorts(ctx context.Context) ([]store.Cohort, error)
	// The members the sibling judge names slow.
	ListSlowMembers(ctx context.Context) ([]store.MemberState, error)
	// The database judge's states (written by the evaluator's passes too).
	ListDatabaseStates(ctx context.Context) ([]store.DatabaseState, error)
	ListDatabaseVolumes(ctx context.Context) ([]store.DatabaseVolume, error)
}

var _ Store = (*store.Store)(nil)

// Collector builds the exposition of the whole server and serves it.
type Collector struct {
	st      Store
	opts    Options
	fams    [numFamilies]family
	classic classicBounds // opts.ClassicBuckets, formatted once
	// The I/O sizes a verdict carries a split for (vocab.IOSizes) and
	// their io_size_bytes label values.
	ioSizes     []uint32
	ioSizeNames []string

	mu  sync.Mutex // held by the scrape that refreshes; the others wait and share its result
	gen uint64     // refreshes so far

	// Inputs of the last build.
	hosts     []store.Agent
	seqs      []store.VolumeSequence // judged sequences
	vols      []store.JudgedVolume
	volsOK    bool
	readAt    time.Time             // when the volumes were last read
	present   map[volKey]presentVol // present volumes
	volParts  map[volKey]*volPart
	baseParts map[volKey]*basePart
	pass      passReads // the whole-table reads of the last evaluator pass
	counts    map[store.RecordKind]uint64
	countedAt time.Time

	// Outputs: each family's series and encodings, what changed since the
	// last publish, and the whole bodies of the current version by format
	// and shard.
	out     [numFamilies]famState
	changes changeLog
	bodies  map[bodyKey][]byte
}

// volKey is a volume's stable identity: its agent and mount point.
type volKey struct{ agent, mount string }

// presentVol is what the baselines need of a present volume.
type presentVol struct {
	host string
	hash uint64 // shardHash of its key
}

// New returns a Collector over st.
func New(st Store, opts Options) (*Collector, error) {
	if opts.ClassicBuckets == nil {
		opts.ClassicBuckets = DefaultClassicBuckets()
	}
	if err := checkClassicBuckets(opts.ClassicBuckets); err != nil {
		return nil, err
	}
	orDefault(&opts.AgentStaleAfter, 5*time.Minute)
	orDefault(&opts.RecordCountsEvery, time.Minute)
	orDefault(&opts.MaxAge, 30*time.Second)
	orDefault(&opts.Timeout, 20*time.Second)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Collector{st: st, opts: opts, fams: newFamilies(), classic: newClassicBounds(opts.ClassicBuckets),
		ioSizes: vocab.IOSizes(), ioSizeNames: vocab.IOSizeNames(), volParts: map[volKey]*volPart{}, baseParts: map[volKey]*basePart{}}
	for i := range c.out {
		c.out[i].log = &c.changes
	}
	return c, nil
}

// orDefault sets a duration option that is not positive to its default.
func orDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Invalidate makes the next scrape read the volumes and baselines again.
func (c *Collector) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.volsOK, c.pass = false, passReads{}
	for _, p := range c.baseParts {
		p.readAt = time.Time{}
	}
}

// Gather returns the current metric families, in name order (it
// implements prometheus.Gatherer): the protobuf exposition decoded, so
// exactly what a scrape gets.
func (c *Collector) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	c.refresh(allShards)
	body, err := c.body(bodyKey{protobuf: true})
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []*dto.MetricFamily
	r := bufio.NewReader(bytes.NewReader(body))
	for {
		mf := &dto.MetricFamily{}
		if err := protodelim.UnmarshalFrom(r, mf); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode exposition: %w", err)
		}
		out = append(out, mf)
	}
}

func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func cmpString(a, b string) int { return strings.Compare(a, b) }
