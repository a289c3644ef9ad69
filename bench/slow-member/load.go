//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loader is the steady work on one array that the members are judged
// under: a database-like mix of 8 KiB random reads and writes (direct
// I/O, so every one reaches the array) on a file written in full first,
// arriving at random (Poisson) at a fixed rate, at most qd at once.
type loader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   int
	lastEr error
}

const (
	loadBlock = 8 << 10
	loadChunk = 1 << 20
)

// startLoad writes size bytes of the load file in mnt and starts the load:
// rate ops a second, writeShare of them writes, at most qd in flight.
func startLoad(ctx context.Context, mnt string, size int64, rate, writeShare float64, qd int, seed uint64) (*loader, error) {
	f, err := os.OpenFile(filepath.Join(mnt, "load.dat"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o600)
	if err != nil {
		return nil, err
	}
	buf := aligned(loadChunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += loadChunk {
		if _, err := f.WriteAt(buf, off); err != nil {
			f.Close()
			return nil, fmt.Errorf("load file: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &loader{cancel: cancel}
	l.wg.Add(1)
	go func() { // owned: stop waits for it
		defer l.wg.Done()
		defer f.Close()
		l.run(ctx, f, size, rate, writeShare, qd, seed)
	}()
	return l, nil
}

func (l *loader) run(ctx context.Context, f *os.File, size int64, rate, writeShare float64, qd int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	sem := make(chan []byte, qd)
	for range qd {
		sem <- aligned(loadBlock)
	}
	var ops sync.WaitGroup
	defer ops.Wait()
	next := time.Now()
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		var buf []byte
		select {
		case buf = <-sem:
		case <-ctx.Done():
			return
		}
		off := rng.Int64N(size/loadBlock) * loadBlock
		write := rng.Float64() < writeShare
		ops.Add(1)
		go func() { // owned: run waits for ops before returning
			defer ops.Done()
			var err error
			if write {
				_, err = f.WriteAt(buf, off)
			} else {
				_, err = f.ReadAt(buf, off)
			}
			if err != nil {
				l.mu.Lock()
				l.errs++
				l.lastEr = err
				l.mu.Unlock()
			}
			sem <- buf
		}()
	}
}

// stop ends the load and waits for the operations in flight.
func (l *loader) stop() {
	l.cancel()
	l.wg.Wait()
}

// failures is how many operations failed, and the last error.
func (l *loader) failures() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs, l.lastEr
}

// aligned returns n bytes at a 4 KiB boundary, as direct I/O needs.
func aligned(n int) []byte {
	b := make([]byte, n+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)) % 4096
	return b[off : off+n : off+n]
}
