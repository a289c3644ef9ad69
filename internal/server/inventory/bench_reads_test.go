package inventory

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// readQueries are the read kinds BenchmarkReads measures, each a cycle of
// URLs (relative to /api/v1/); pages follow their next_page_token three
// pages deep before starting over.
var readQueries = []struct {
	kind string
	urls []string
}{
	{"volumes", []string{
		"volumes?verdict=misaligned&limit=100",
		"volumes?verdict=misaligned&raid_level=raid10&sort=-split_fraction&limit=100",
		"volumes?data_offset_bytes=32256&fs=ntfs&limit=100",
		"volumes?host=db01*&limit=100",
		"volumes?rule=partition-offset-stripe-unit&severity=critical&sort=host&limit=100",
		"volumes?media=sata-ssd&min_split_fraction=0.05&sort=-data_offset_bytes&limit=100",
		"volumes?mount_point=/data2&verdict=aligned&sort=-host&limit=100",
		"volumes?degraded=false&sort=profile&limit=100",
	}},
	{"summary", []string{"summary"}},
	{"summary-filtered", summaryFilters},
	{"hosts", []string{"hosts?limit=100", "hosts?host=db01*&limit=100", "hosts?sort=-host&limit=100"}},
}

var summaryFilters = []string{
	"summary?raid_level=raid10", "summary?verdict=misaligned", "summary?severity=critical", "summary?media=sata-ssd&fs=ntfs",
	"summary?rule=partition-offset-stripe-unit", "summary?degraded=true", "summary?degraded=false&raid_level=raid5",
	"summary?host=db001000.example", "summary?host=db01*", "summary?host=*7&verdict=misaligned", "summary?mount_point=/data*",
}

// BenchmarkReads: p50/p99/max of every inventory read kind over HTTP as
// served (API.Run in the background), then of the first summaries after a
// change (a baseline state written: the store's generation moves), the
// whole fleet's and a filtered one, PLUMBLINE_BENCH_CHANGES times
// (default 20).
//
//	PLUMBLINE_BENCH_VOLUMES=1000000 PLUMBLINE_BENCH_POSTGRES=postgres://... \
//	  go test -run '^$' -bench 'Reads/postgres' -benchtime 400x -timeout 300m ./internal/server/inventory/
func BenchmarkReads(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e, func(b *testing.B) {
			f := fleet(b, e)
			for _, k := range readQueries {
				var lat latencies
				tokens := make([]string, len(k.urls))
				for i := range b.N {
					qi := i % len(k.urls)
					url := f.srv.URL + "/api/v1/" + k.urls[qi]
					if tokens[qi] != "" && (i/len(k.urls))%4 != 0 {
						url += "&next_page_token=" + tokens[qi]
					}
					start := time.Now()
					body := fetch(b, url)
					lat = append(lat, time.Since(start))
					tokens[qi] = nextToken(body)
				}
				logLatencies(b, k.kind, lat)
			}
			if b.N == 1 {
				return // the testing package's first probe of a -benchtime Nx run
			}
			n, _ := strconv.Atoi(os.Getenv("PLUMBLINE_BENCH_CHANGES"))
			if n <= 0 {
				n = 20
			}
			var whole, filtered, visible latencies
			for i := range n {
				if err := f.st.PutBaselineStates(context.Background(), []store.BaselineState{{AgentID: "agent-000000", MountPoint: "/data0",
					State: "ok", Reason: fmt.Sprint("bench change ", time.Now().UnixNano()), UpdatedAt: time.Now()}}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				fetch(b, f.srv.URL+"/api/v1/summary")
				whole = append(whole, time.Since(start))
				start = time.Now()
				fetch(b, f.srv.URL+"/api/v1/"+summaryFilters[i%len(summaryFilters)])
				filtered = append(filtered, time.Since(start))
				if d, ok := summaryVisible(b, f, start); ok {
					visible = append(visible, d)
				}
			}
			logLatencies(b, "summary-after-change", whole)
			logLatencies(b, "summary-filtered-after-change", filtered)
			if len(visible) > 0 {
				logLatencies(b, "change-visible-in-summary", visible)
			}
		})
	}
}

func logLatencies(b *testing.B, kind string, l latencies) {
	l.report(b) // the last kind's stay as the metrics
	b.Logf("%-30s %5d requests: p50 %v p99 %v max %v", kind, len(l), l[len(l)/2].Round(10*time.Microsecond),
		l[min(len(l)-1, int(0.99*float64(len(l))))].Round(10*time.Microsecond), l[len(l)-1].Round(10*time.Microsecond))
}

// summaryVisible polls the whole fleet's summary until the generation it
// states (Plumbline-Summary-Generation) is the store's, and returns how
// long after since that was; false when the API states none.
func summaryVisible(b *testing.B, f *benchFleet, since time.Time) (time.Duration, bool) {
	want, err := f.st.InventoryGeneration(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for {
		resp, err := http.Get(f.srv.URL + "/api/v1/summary")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := resp.Header.Get("Plumbline-Summary-Generation")
		if h == "" {
			return 0, false
		}
		if gen, _ := strconv.ParseUint(h, 10, 64); gen >= want {
			return time.Since(since), true
		}
		time.Sleep(10 * time.Millisecond)
	}
}
