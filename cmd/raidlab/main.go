//go:build linux

// Command raidlab runs emulated disk arrays as real block devices (see
// internal/lab/raidlab): a FUSE-served array under a loop device with direct
// I/O, on which partition tables, file systems, fio and the agent run.
//
//	raidlab up --level raid10 --disks 4 --stripe-unit 64KiB --size 2GiB --preset fast
//	raidlab down DEV
//	raidlab fault DEV slow --member N --factor F
//	raidlab fault DEV latency --add DUR [--member N]
//	raidlab fault DEV fail --member N
//	raidlab fault DEV throttle --iops N --burst B
//	raidlab fault DEV stall --member N --fraction F --latency DUR
//	raidlab fault DEV rebuild --member N [--load F]
//	raidlab fault DEV restore
//	raidlab stats DEV [--format table|json]
//	raidlab list
//	raidlab reap
//
// `up` starts a daemon and prints the loop device path alone on its last
// line once the device is ready. Needs root and /dev/fuse. It is a lab
// tool: it shells out (losetup, umount, partx), which the agent never does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

const usage = `usage: raidlab <command> [flags]

commands:
  up      start an emulated array in the background; prints its loop device last
  down    DEV: unmount what is mounted from DEV, detach it, stop its emulator
  fault   DEV slow --member N --factor F | latency --add DUR [--member N] | fail --member N |
          throttle --iops N --burst B | stall --member N --fraction F --latency DUR |
          rebuild --member N [--load F] | restore
  stats   DEV: requests, split requests and member operations
  list    the labs on this machine
  reap    remove the leftovers of labs whose process died

Members are numbered from 0. The state root (default /run/plumbline-raidlab)
can be changed with --state-root or PLUMBLINE_RAIDLAB_ROOT on every command.
`

func main() { command.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Dispatch(ctx, "raidlab", usage, map[string]command.Func{
		"up":    exitStatus(runUp),
		"serve": exitStatus(runServe),
		"down":  exitStatus(runDown),
		"fault": exitStatus(runFault),
		"stats": exitStatus(runStats),
		"list":  exitStatus(runList),
		"reap":  exitStatus(runReap),
	}, args, stdout, stderr)
}

// exitStatus runs a subcommand that fails with an error: 0 after -h, 2
// after bad usage (already printed), 1 with the error printed.
func exitStatus(f func(ctx context.Context, args []string, stdout, stderr io.Writer) error) command.Func {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		err := f(ctx, args, stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		}
		fmt.Fprintln(stderr, "raidlab:", strings.TrimPrefix(err.Error(), "raidlab: "))
		return 1
	}
}

var errUsage = errors.New("usage")

func stateRootDefault() string {
	if r := os.Getenv("PLUMBLINE_RAIDLAB_ROOT"); r != "" {
		return r
	}
	return raidlab.DefaultStateRoot
}

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("raidlab "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("state-root", stateRootDefault(), "where labs keep their state directories")
	return fs, root
}

// parseFlags parses and turns a flag error into errUsage (already printed).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return errUsage
	}
	return nil
}
