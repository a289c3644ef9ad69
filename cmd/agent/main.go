// Command agent is Plumbline's host agent: it discovers the geometry of the
// host's database volumes, judges their alignment and runs low-impact I/O
// probes shaped like database traffic.
//
//	agent inspect [--config FILE] [--path.sysfs DIR] [--path.procfs DIR] [--format table|json]
//	agent probe   --dir DIR --kind random-read|random-write|log-write [flags]
//	agent run     --config FILE [--check]
//	agent databases --config FILE [--wait DUR] [--format table|json]
//	agent enroll  --server ADDR --token-file F --ca-hash sha256:HEX --dir DIR
//	agent service install|uninstall|run [--config FILE]   (Windows)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/plumbline/plumbline/internal/command"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: agent <command> [flags]

commands:
  inspect    discover volume geometry and print alignment verdicts
  probe      run one low-impact I/O probe against a probe file
  run        run the agent: scheduled probes, geometry, durable spool, report to the server
  databases  read each configured database's own I/O statistics once and print them
  enroll     join a server with a token: key, certificate and CA written to a directory
  service    Windows: install, uninstall or run the agent as a Windows service
  version    print the agent version

Run 'agent <command> -h' for the flags of a command.
`

func main() { command.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Dispatch(ctx, "agent", usage, map[string]command.Func{
		"inspect":   runInspect,
		"probe":     runProbe,
		"run":       runRun,
		"databases": runDatabases,
		"enroll":    runEnroll,
		"service":   runService,
		"version":   printVersion,
		"--version": printVersion,
	}, args, stdout, stderr)
}

func printVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "plumbline agent", version)
	return 0
}

// newFlagSet is the flag set of `agent <name>`: parse errors and -h go to
// stderr, -h as usage followed by the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	return fl
}

// parseFlags parses args with fl. When ok is false the command ends with
// code: exitOK after -h, exitUsage after a bad flag (fl has said why).
func parseFlags(fl *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}
