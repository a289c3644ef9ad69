package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/plumbline/plumbline/internal/agent/spool"
)

// fullResult is what the disk-full case counted.
type fullResult struct {
	Generated                 uint64        // records appended, over both runs
	Stored                    uint64        // records the server stored
	Dropped                   uint64        // appends refused for want of space, counted (disk-full)
	Held                      uint64        // records still in the spool at the end
	Resumed                   time.Duration // from the server's return to the first record spooled again
	LoggedFull, LoggedResumed int
}

func (r fullResult) String() string {
	return fmt.Sprintf("generated %d, stored %d, dropped and counted %d (disk-full), held %d; spooling resumed %.1fs after the server came back; log: %d full, %d resumed",
		r.Generated, r.Stored, r.Dropped, r.Held, r.Resumed.Seconds(), r.LoggedFull, r.LoggedResumed)
}

// BenchFullBytes is the size of the bench's full file system; the tests
// use a smaller one (the same path, filled sooner).
const BenchFullBytes = 512 << 10

// runDiskFull: the agent's spool on a tmpfs of size bytes; the server is down
// while the agent probes until 20 appends were refused for want of
// space; the server comes back; once the agent spools again (it must
// free the space by itself) it runs on for 20 more records, stops, and
// a run without probes delivers the rest.
func runDiskFull(ctx context.Context, dir, dsn string, size int64) (fullResult, error) {
	var res fullResult
	mnt := filepath.Join(dir, "spoolfs")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return res, err
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%dk", size>>10)); err != nil {
		return res, fmt.Errorf("mount a %d KiB tmpfs on %s (needs root): %w", size>>10, mnt, err)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	l, err := newLab(ctx, dir, dsn, filepath.Join(mnt, "spool"))
	if err != nil {
		return res, err
	}
	defer l.close()
	l.stop()
	cfg := l.cfg
	log := &logBuffer{}
	r1, err := l.runAgent(cfg, log)
	if err != nil {
		return res, err
	}
	sp := r1.a.Spool()
	err = waitFor("20 appends refused", 2*time.Minute, func() bool { return sp.Stats().Lost[spool.LostDiskFull] >= 20 })
	var atFull uint64
	if err == nil {
		atFull = r1.generated()
		err = l.start()
	}
	back := time.Now()
	if err == nil {
		err = waitFor("spooling to resume", 2*time.Minute, func() bool { return r1.generated() > atFull })
		res.Resumed = time.Since(back)
	}
	if err == nil {
		err = waitFor("20 records spooled after", time.Minute, func() bool { return r1.generated() >= atFull+20 })
	}
	if serr := r1.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return res, err
	}
	res.Dropped = sp.Stats().Lost[spool.LostDiskFull]
	cfg.Probes = nil
	r2, err := l.runAgent(cfg, log)
	if err != nil {
		return res, err
	}
	sp2 := r2.a.Spool()
	err = waitFor("the spool to drain", time.Minute, func() bool {
		return sp2.Stats().Records == 0 && sp2.SendingIncarnation() == sp2.Incarnation()
	})
	if serr := r2.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return res, err
	}
	l.stop()
	res.Generated = r1.generated() + r2.generated()
	res.Held = uint64(sp2.Stats().Records)
	res.LoggedFull, res.LoggedResumed = log.count("spool file system full"), log.count("spooling resumed")
	if res.Stored, err = l.stored(ctx); err != nil {
		return res, err
	}
	switch {
	case res.Stored+res.Held != res.Generated:
		err = fmt.Errorf("stored %d + held %d != generated %d", res.Stored, res.Held, res.Generated)
	case res.LoggedFull == 0 || res.LoggedResumed == 0:
		err = fmt.Errorf("log: %d lines saying the spool is full, %d saying it resumed; want both", res.LoggedFull, res.LoggedResumed)
	}
	return res, err
}
