// Command spooldamage measures what a damaged or full spool costs, with a
// real agent and a real server (gRPC over mutual TLS, SQLite or
// PostgreSQL) in one process:
//
//   - the damaged-spool matrix: records spooled while the server is down,
//     the ack file, a segment and a segment header damaged, the agent
//     restarted, the server back. Per case: records generated, stored,
//     counted lost (by reason), destroyed by the damage.
//
//   - the disk-full case (--tmpfs, as root): the spool on a 512 KiB tmpfs
//     that fills while the server is down; records generated, stored,
//     dropped and counted, and whether spooling resumed by itself.
//
//     spooldamage [--dsn sqlite:///tmp/x.db | postgres://...] [--fast] [--tmpfs]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "spooldamage:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("dsn", "", "the store (default: a SQLite file in a temporary directory)")
	fast := flag.Bool("fast", false, "only the matrix cases the tests run (one per recovery path)")
	tmpfs := flag.Bool("tmpfs", false, "also run the disk-full case on a 512 KiB tmpfs (needs root)")
	only := flag.String("only", "", "run only the matrix cases whose name contains this")
	noMatrix := flag.Bool("no-matrix", false, "skip the matrix (with --tmpfs: the disk-full case alone)")
	flag.Parse()
	ctx := context.Background()
	base, err := os.MkdirTemp("", "spooldamage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	failed := 0
	fmt.Printf("%-36s %9s %7s %9s %5s  %s\n", "ack/segment/header", "generated", "stored", "destroyed", "lost", "lost by reason")
	for i, c := range matrix(*fast) {
		if *noMatrix || !strings.Contains(c.String(), *only) {
			continue
		}
		dir := filepath.Join(base, fmt.Sprint(i))
		d := *dsn
		if d == "" {
			d = "sqlite://" + filepath.Join(dir, "plumbline.db")
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		res, err := runCase(ctx, dir, d, c)
		status := "ok"
		if err != nil {
			status, failed = "FAIL: "+err.Error(), failed+1
		}
		fmt.Printf("%-36s %9d %7d %9d %5d  %s %s\n", c, res.Generated, res.Stored, res.Destroyed, res.lost(), reasons(res.Lost), status)
	}
	if *tmpfs {
		dir := filepath.Join(base, "full")
		d := *dsn
		if d == "" {
			d = "sqlite://" + filepath.Join(base, "full.db")
		}
		res, err := runDiskFull(ctx, dir, d, BenchFullBytes)
		status := "ok"
		if err != nil {
			status, failed = "FAIL: "+err.Error(), failed+1
		}
		fmt.Printf("disk full (512 KiB tmpfs): %s %s\n", res, status)
	}
	if failed > 0 {
		return errors.New(fmt.Sprint(failed, " case(s) failed"))
	}
	return nil
}

func reasons(m map[string]uint64) string {
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
