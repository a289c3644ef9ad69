// Package command is what Plumbline's commands share around their own
// flags: a command is a Func of its context, arguments and streams that
// returns its exit status (so its tests drive it as main does); Main runs
// one for the process under the context every command runs under
// (cancelled by SIGINT and SIGTERM); and the commands made of subcommands
// (agent, raidlab) choose one from the first argument, nomad-style: a
// table of names, with help and bad usage answered alike.
package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Context is the context a command runs under: SIGINT or SIGTERM cancel
// it, so the command stops cleanly. Call stop when done: a later signal
// then ends the process as usual.
func Context() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Func is a command or a subcommand: its arguments (after its name), its
// output streams, and the exit status it returns.
type Func func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Main runs the command run on the process's arguments and standard
// streams under Context, and exits with the status it returns.
func Main(run Func) {
	ctx, stop := Context()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Dispatch runs the subcommand of prog that args[0] names with the rest
// of args and returns its exit status. No arguments print usage to stderr
// (status 2); help, -h and --help print it to stdout (0); an unknown name
// is bad usage (2).
func Dispatch(ctx context.Context, prog, usage string, subs map[string]Func, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if f, ok := subs[args[0]]; ok {
		return f(ctx, args[1:], stdout, stderr)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", prog, args[0], usage)
	return 2
}
