// Command fleetsim simulates a fleet of Plumbline agents against a server:
// every simulated agent has its own identity and client certificate
// (minted from the dev CA), its own TLS connection, a varied geometry
// profile (aligned and misaligned partitions, declared RAID 1/5/10 with
// 64/128/256 KiB stripe units, HDD/SSD/NVMe, ext4/xfs/ntfs), and speaks the
// agent protocol as `agent run` does: Hello, a geometry snapshot first,
// then probe results with real latency histograms, in batches with
// per-agent sequence numbers, resending whatever was not acknowledged and
// reconnecting with full-jitter backoff.
//
//	server --dev --data-dir DIR &
//	fleetsim --dev-dir DIR/dev --agents 1000 --duration 30s
//
// It ends with one line: records_per_second=N, the Report latency
// percentiles and the error count. With --reconnect it also measures how
// long after a server restart every agent has reported again.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/plumbline/plumbline/internal/command"
)

// version is the agent_version the simulated agents announce.
const version = "fleetsim"

func main() { command.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fleetsim:", err)
		return 2
	}
	if n, err := raiseFileLimit(); err != nil {
		fmt.Fprintln(stderr, "fleetsim: raise open-file limit:", err)
	} else if need := uint64(cfg.Agents) + 64; n > 0 && n < need {
		fmt.Fprintf(stderr, "fleetsim: open-file limit %d is below the %d this run needs (one socket per agent); raise the hard limit (ulimit -Hn)\n", n, need)
		return 1
	}
	target, issue, err := devTarget(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "fleetsim:", err)
		return 1
	}
	sum, err := Run(ctx, cfg, target, issue, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fleetsim:", err)
		return 1
	}
	sum.Print(stdout)
	if sum.Connected < cfg.Agents {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.DevDir, "dev-dir", "", "the `DIR/dev` directory of a `server --dev --data-dir DIR` (agent.yaml, ca.crt; the CA in DIR/ca)")
	fs.StringVar(&c.Address, "server", "", "server gRPC `address`, or replicas' addresses separated by commas (agents spread over them and fail over) (default: the one in DIR/dev/agent.yaml)")
	fs.IntVar(&c.Agents, "agents", 1000, "simulated agents, each with its own certificate and TLS connection")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long the agents produce records (after all are connected)")
	fs.Float64Var(&c.Rate, "rate", 12000, "records/s the whole fleet produces")
	fs.Float64Var(&c.RatePerAgent, "rate-per-agent", 0, "records/s each agent produces (overrides --rate)")
	fs.DurationVar(&c.ReportInterval, "report-interval", time.Second, "how often each agent sends its batch (0: the interval the server announces in Hello)")
	fs.IntVar(&c.MaxBatch, "max-batch", 0, "records per Report at most (0: the server's max_batch_records)")
	fs.IntVar(&c.ConnectConcurrency, "connect-concurrency", 64, "Hellos in flight during the connect phase")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", 3*time.Minute, "how long the connect phase may take")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "how long the final flush may take after --duration")
	fs.BoolVar(&c.Reconnect, "reconnect", false, "restart test: end once every agent has reported again after the first failure (restart the server meanwhile), print reconnect_seconds")
	fs.IntVar(&c.MaintenanceEvery, "maintenance-every", 0, "every `N`th probe run of each agent is reported skipped by a maintenance window (0: none)")
	fs.IntVar(&c.ScanEvery, "scan-every", 100, "every `N`th probe run of an agent whose volumes include hardware RAID with a hidden stripe (a quarter of the volumes) is a stripe-scan of one of them, the first included (0: none)")
	fs.DurationVar(&c.BackoffBase, "backoff.base", time.Second, "reconnect backoff base (full jitter, doubling), as the agent's")
	fs.DurationVar(&c.BackoffMax, "backoff.max", 30*time.Second, "reconnect backoff ceiling")
	fs.StringVar(&c.IDPrefix, "id-prefix", "fleetsim-", "agent ids are this prefix and a 5-digit number")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the geometry profiles and latencies")
	fs.DurationVar(&c.Progress, "progress", 5*time.Second, "interval of progress lines on stderr (0: none)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case c.DevDir == "":
		return Config{}, errors.New("--dev-dir DIR/dev is required (the dev directory of `server --dev --data-dir DIR`)")
	case c.Agents < 1 || c.Agents > 99_999:
		return Config{}, fmt.Errorf("--agents %d: want 1 to 99999", c.Agents)
	case c.Duration <= 0:
		return Config{}, fmt.Errorf("--duration %s: want more than 0", c.Duration)
	case c.Rate < 0 || c.RatePerAgent < 0:
		return Config{}, errors.New("--rate and --rate-per-agent: want 0 or more")
	case c.MaintenanceEvery < 0 || c.ScanEvery < 0:
		return Config{}, errors.New("--maintenance-every and --scan-every: want 0 or more")
	case c.ConnectConcurrency < 1:
		return Config{}, fmt.Errorf("--connect-concurrency %d: want at least 1", c.ConnectConcurrency)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return Config{}, errors.New("--backoff.base must be > 0 and at most --backoff.max")
	}
	return c, nil
}
