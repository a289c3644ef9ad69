package inventory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSummarizeIndex: the in-memory summary alone (no store, no
// HTTP) over the seeded fleet's index (PLUMBLINE_BENCH_SQLITE), per
// filter. Besides wall time it reports thread-cpu-ms/op, the CPU time
// of the benchmark's own thread: on a shared machine wall time is mostly
// the other processes' (GC work on other threads is not in it).
func BenchmarkSummarizeIndex(b *testing.B) {
	f := fleet(b, "sqlite")
	ix, err := buildSummaryIndex(context.Background(), f.api.st)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"", "raid_level=raid10", "verdict=misaligned", "severity=critical", "media=sata-ssd&fs=ntfs",
		"rule=partition-offset-stripe-unit", "degraded=true", "degraded=false&raid_level=raid5", "host=db001000.example",
		"host=db01*", "host=*7&verdict=misaligned", "mount_point=/data*", "min_split_fraction=0.05&io_size_bytes=65536"} {
		p, err := newParams(httptest.NewRequest(http.MethodGet, "/api/v1/summary?"+q, nil), summaryParams)
		if err != nil {
			b.Fatal(err)
		}
		flt, err := p.volumeFilter()
		if err != nil {
			b.Fatal(err)
		}
		name := q
		if name == "" {
			name = "all"
		}
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU(b)
			for b.Loop() {
				ix.summarize(flt, defaultTop)
			}
			b.ReportMetric(float64(threadCPU(b)-start)/float64(time.Millisecond)/float64(b.N), "thread-cpu-ms/op")
		})
	}
}

// threadCPU is the CPU time (user and system) of the calling thread.
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
