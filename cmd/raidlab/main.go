//go:build linux

// Command raidlab runs emulated disk arrays as real block devices (see
// internal/raidlab): a FUSE-served array under a loop device with direct
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
	"os/signal"
	"strings"
	"syscall"

	"github.com/plumbline/plumbline/internal/raidlab"
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

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "up":
		err = runUp(ctx, args[1:], stdout, stderr)
	case "serve":
		err = runServe(args[1:], stdout, stderr)
	case "down":
		err = runDown(ctx, args[1:], stdout, stderr)
	case "fault":
		err = runFault(ctx, args[1:], stdout, stderr)
	case "stats":
		err = runStats(ctx, args[1:], stdout, stderr)
	case "list":
		err = runList(args[1:], stdout, stderr)
	case "reap":
		err = runReap(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "raidlab: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "raidlab:", strings.TrimPrefix(err.Error(), "raidlab: "))
		return 1
	}
	return 0
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
