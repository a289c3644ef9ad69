package inventory

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// fleetVolume is volume i of a varied fleet: three partition offsets
// (31.5 KiB, 1 MiB, unreadable), two arrays (RAID 10 at 64 KiB on hard
// disks, RAID 5 at 128 KiB on SSDs), three file systems.
func fleetVolume(i int, mp string) *plumblinev1.Volume {
	fs := []string{"xfs", "ext4", "ntfs"}[i%3]
	block := uint32(4096)
	if fs == "ntfs" {
		block = 8192 + uint32(i%2)*(56<<10) // 8 KiB or 64 KiB clusters
	}
	part := &plumblinev1.Layer{Kind: "partition", Device: "sdb1", LogicalSectorBytes: 512, PartitionTable: "gpt", PartitionNumber: 1}
	switch (i / 3) % 3 {
	case 0:
		part.OffsetBytes = u64(32256)
	case 1:
		part.OffsetBytes = u64(1 << 20)
	}
	raid := &plumblinev1.Layer{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
		LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared",
		Rotational: boolp(true), Sources: map[string]string{"rotational": "declared"}}
	if (i/9)%2 == 1 {
		raid.RaidLevel, raid.StripeUnitBytes, raid.RaidDisks, raid.RaidDataDisks = "raid5", 128<<10, 5, 4
		raid.Rotational = boolp(false)
	}
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: fs, BlockSizeBytes: block, Uuid: fmt.Sprintf("uuid-%d", i)},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: fs, BlockSizeBytes: block, OffsetBytes: u64(0)},
			part, raid,
		},
	}
}

func boolp(b bool) *bool { return &b }

// report stores one geometry snapshot of agent id at sequence seq through
// the server's validation.
func report(t testing.TB, st *store.Store, id, hostname string, seq uint64, vols ...*plumblinev1.Volume) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: hostname, OS: "linux", Kernel: "6.1", AgentVersion: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
		Sequence: seq, ProducedAt: timestamppb.New(time.Now().Add(-time.Minute).Add(time.Duration(seq) * time.Millisecond)),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
	}}}
	b, err := ingest.ValidateReport(req, ingest.Limits{}, time.Now())
	if err != nil || len(b.Rejections) > 0 {
		t.Fatalf("ValidateReport: %v %v", err, b.Rejections)
	}
	if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
		t.Fatal(err)
	}
}

// seedFleet stores hosts × perHost volumes; host h is "dbNN.example".
func seedFleet(t testing.TB, st *store.Store, hosts, perHost int) {
	t.Helper()
	i := 0
	for h := range hosts {
		var vols []*plumblinev1.Volume
		for v := range perHost {
			vols = append(vols, fleetVolume(i, fmt.Sprintf("/data%d", v)))
			i++
		}
		report(t, st, fmt.Sprintf("agent%02d", h), fmt.Sprintf("db%02d.example", h), 1, vols...)
	}
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// list walks every page of /api/v1/volumes with the query and returns
// the volumes.
func list(t *testing.T, base, query string, limit int) []map[string]any {
	t.Helper()
	var out []map[string]any
	token := ""
	for range 1000 {
		q, _ := url.ParseQuery(query)
		q.Set("limit", fmt.Sprint(limit))
		if token != "" {
			q.Set("next_page_token", token)
		}
		code, body := get(t, base+"/api/v1/volumes?"+q.Encode())
		if code != http.StatusOK {
			t.Fatalf("GET /api/v1/volumes?%s: %d %v", q.Encode(), code, body)
		}
		for _, v := range body["volumes"].([]any) {
			out = append(out, v.(map[string]any))
		}
		tok, _ := body["next_page_token"].(string)
		if tok == "" {
			return out
		}
		token = tok
	}
	t.Fatal("more than 1000 pages")
	return nil
}

func ids(vols []map[string]any) []string {
	var out []string
	for _, v := range vols {
		out = append(out, v["id"].(string))
	}
	return out
}

func num64(v any) float64 {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	f, _ := n.Float64()
	return f
}

func alignmentOf(v map[string]any) map[string]any {
	a, _ := v["alignment"].(map[string]any)
	return a
}

func findingsOf(v map[string]any) []map[string]any {
	var out []map[string]any
	fs, _ := alignmentOf(v)["findings"].([]any)
	for _, f := range fs {
		out = append(out, f.(map[string]any))
	}
	return out
}

func splitOf(v map[string]any, size string) float64 {
	sf, _ := alignmentOf(v)["split_fraction"].(map[string]any)
	if sf == nil || sf[size] == nil {
		return -1
	}
	return num64(sf[size])
}

// TestFilters checks every filter alone and several combined against a
// predicate over the unfiltered volumes' JSON, on both engines.
func TestFilters(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 12, 3)
			if err := st.PutBaselineStates(context.Background(), []store.BaselineState{
				{AgentID: "agent01", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "p95 above cohort", UpdatedAt: time.Now()},
				{AgentID: "agent02", MountPoint: "/data1", State: "ok", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			srv := serveSyncing(t, st, Options{SyncPeriod: 0})
			defer srv.Close()
			all := list(t, srv.URL, "", 1000)
			if len(all) != 36 {
				t.Fatalf("%d volumes, want 36", len(all))
			}
			str := func(v map[string]any, k string) string { s, _ := v[k].(string); return s }
			hasFinding := func(v map[string]any, rule, sev string) bool {
				for _, f := range findingsOf(v) {
					if (rule == "" || f["rule"] == rule) && (sev == "" || f["severity"] == sev) {
						return true
					}
				}
				return false
			}
			profile := str(all[4], "profile")
			tests := []struct {
				query string
				keep  func(v map[string]any) bool
			}{
				{"verdict=misaligned", func(v map[string]any) bool { return alignmentOf(v)["verdict"] == "misaligned" }},
				{"verdict=aligned", func(v map[string]any) bool { return alignmentOf(v)["verdict"] == "aligned" }},
				{"verdict=unknown", func(v map[string]any) bool { return alignmentOf(v)["verdict"] == "unknown" }},
				{"host=db03.example", func(v map[string]any) bool { return v["host"] == "db03.example" }},
				{"host=db0*", func(v map[string]any) bool { ok, _ := path.Match("db0*", str(v, "host")); return ok }},
				{"host=DB1?.EXAMPLE", func(v map[string]any) bool { ok, _ := path.Match("db1?.example", str(v, "host")); return ok }},
				{"mount_point=/data1", func(v map[string]any) bool { return v["mount_point"] == "/data1" }},
				{"mount_point=*2", func(v map[string]any) bool { return strings.HasSuffix(str(v, "mount_point"), "2") }},
				{"fs=ntfs", func(v map[string]any) bool { return v["filesystem"].(map[string]any)["type"] == "ntfs" }},
				{"raid_level=raid5", func(v map[string]any) bool { return v["raid_level"] == "raid5" }},
				{"stripe_unit_bytes=131072", func(v map[string]any) bool { return num64(alignmentOf(v)["stripe_unit_bytes"]) == 131072 }},
				{"data_offset_bytes=32256", func(v map[string]any) bool { return num64(alignmentOf(v)["data_offset_bytes"]) == 32256 }},
				{"media=sata-ssd", func(v map[string]any) bool { return v["media"] == "sata-ssd" }},
				{"profile=" + url.QueryEscape(profile), func(v map[string]any) bool { return v["profile"] == profile }},
				{"min_split_fraction=0.1", func(v map[string]any) bool { return splitOf(v, "8192") >= 0.1 }},
				{"min_split_fraction=0.1&io_size_bytes=65536", func(v map[string]any) bool { return splitOf(v, "65536") >= 0.1 }},
				{"degraded=true", func(v map[string]any) bool { return v["host"] == "db01.example" && v["mount_point"] == "/data0" }},
				{"degraded=false", func(v map[string]any) bool { return !(v["host"] == "db01.example" && v["mount_point"] == "/data0") }},
				{"rule=partition-offset-stripe-unit", func(v map[string]any) bool { return hasFinding(v, "partition-offset-stripe-unit", "") }},
				{"severity=critical", func(v map[string]any) bool { return hasFinding(v, "", "critical") }},
				{"severity=info", func(v map[string]any) bool { return hasFinding(v, "", "info") }},
				// Combined.
				{"verdict=misaligned&raid_level=raid10&fs=xfs", func(v map[string]any) bool {
					return alignmentOf(v)["verdict"] == "misaligned" && v["raid_level"] == "raid10" && v["filesystem"].(map[string]any)["type"] == "xfs"
				}},
				{"host=db0*&data_offset_bytes=32256&min_split_fraction=0.05&sort=-split_fraction", func(v map[string]any) bool {
					return strings.HasPrefix(str(v, "host"), "db0") && num64(alignmentOf(v)["data_offset_bytes"]) == 32256 && splitOf(v, "8192") >= 0.05
				}},
				{"rule=partition-offset-stripe-unit&severity=critical&media=hdd-7200", func(v map[string]any) bool {
					return hasFinding(v, "partition-offset-stripe-unit", "critical") && v["media"] == "hdd-7200"
				}},
				{"verdict=aligned&verdict_is_not_misaligned_elsewhere=1", nil},
			}
			for _, tt := range tests {
				if tt.keep == nil {
					continue
				}
				var want []string
				for _, v := range all {
					if tt.keep(v) {
						want = append(want, v["id"].(string))
					}
				}
				got := ids(list(t, srv.URL, tt.query, 5))
				slices.Sort(want)
				slices.Sort(got)
				if len(want) == 0 && !strings.HasPrefix(tt.query, "degraded") {
					t.Errorf("%s: the fixture has no matching volume; the test proves nothing", tt.query)
				}
				if diff := gocmp.Diff(want, got); diff != "" {
					t.Errorf("GET /api/v1/volumes?%s (-want +got):\n%s", tt.query, diff)
				}
			}
			if got := str(all[0], "id"); len(got) != 16 {
				t.Errorf("volume id %q: want 16 hex digits", got)
			}
		})
	}
}

// TestSort checks every sort field, both directions, paged: the keys are
// in order and the pages add up to every volume once.
func TestSort(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 7, 3)
			srv := serveSyncing(t, st, Options{SyncPeriod: 0})
			defer srv.Close()
			all := ids(list(t, srv.URL, "", 1000))
			slices.Sort(all)
			key := map[string]func(v map[string]any) any{
				"host":        func(v map[string]any) any { return v["host"].(string) + "\x00" + v["mount_point"].(string) },
				"mount_point": func(v map[string]any) any { return v["mount_point"] },
				"verdict": func(v map[string]any) any {
					return alignmentOf(v)["verdict"].(string) + "\x00" + v["host"].(string) + "\x00" + v["mount_point"].(string)
				},
				"fs":                    func(v map[string]any) any { return v["filesystem"].(map[string]any)["type"] },
				"raid_level":            func(v map[string]any) any { return v["raid_level"] },
				"media":                 func(v map[string]any) any { return v["media"] },
				"profile":               func(v map[string]any) any { return v["profile"] },
				"stripe_unit_bytes":     func(v map[string]any) any { return num64(alignmentOf(v)["stripe_unit_bytes"]) },
				"data_offset_bytes":     func(v map[string]any) any { return num64(alignmentOf(v)["data_offset_bytes"]) },
				"allocation_unit_bytes": func(v map[string]any) any { return num64(alignmentOf(v)["allocation_unit_bytes"]) },
				"split_fraction":        func(v map[string]any) any { return splitOf(v, "8192") },
				"split_fraction_64k":    func(v map[string]any) any { return splitOf(v, "65536") },
				"severity": func(v map[string]any) any {
					return map[string]float64{"critical": 3, "warning": 2, "info": 1}[v["severity"].(string)]
				},
				"observed_at": func(v map[string]any) any { return v["observed_at"] },
				"id":          func(v map[string]any) any { return v["id"] },
			}
			// Every other I/O size's split fraction sorts as 64 KiB's does.
			for _, size := range vocab.IOSizes()[1:] {
				if f := "split_fraction_" + vocab.IOSizeKey(size); key[f] == nil {
					key[f] = func(v map[string]any) any { return splitOf(v, strconv.FormatUint(uint64(size), 10)) }
				}
			}
			for _, field := range store.VolumeSortFields() {
				k, ok := key[field]
				if !ok {
					t.Errorf("sort field %q has no test", field)
					continue
				}
				for _, desc := range []bool{false, true} {
					s := field
					if desc {
						s = "-" + field
					}
					vols := list(t, srv.URL, "sort="+s, 4)
					got := ids(vols)
					slices.Sort(got)
					if diff := gocmp.Diff(all, got); diff != "" {
						t.Errorf("sort=%s: pages do not add up to every volume once (-want +got):\n%s", s, diff)
					}
					for i := 1; i < len(vols); i++ {
						c := compareAny(k(vols[i-1]), k(vols[i]))
						if c == 0 {
							c = strings.Compare(vols[i-1]["id"].(string), vols[i]["id"].(string))
						}
						if desc {
							c = -c
						}
						if c > 0 {
							t.Errorf("sort=%s: %v before %v", s, k(vols[i-1]), k(vols[i]))
						}
					}
				}
			}
		})
	}
}

func compareAny(a, b any) int {
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case float64:
		return cmp.Compare(x, b.(float64))
	}
	return 0
}

// TestPagingWhileReporting walks the pages while reports keep arriving:
// new hosts, re-reports of every host. Every volume present throughout
// appears exactly once; nothing appears twice.
func TestPagingWhileReporting(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 20, 3)
			// Syncs run as served: in the background, here every 10 ms, so
			// they land between the pages of a walk.
			srv, _ := serveRunning(t, st, Options{SyncPeriod: 10 * time.Millisecond})
			before := ids(list(t, srv.URL, "", 1000))

			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				for n := 0; n < 150 && ctx.Err() == nil; n++ {
					time.Sleep(2 * time.Millisecond)
					// A new host whose name sorts among the old ones, and a
					// re-report (a newer snapshot) of an old one.
					report(t, st, fmt.Sprintf("new%03d", n), fmt.Sprintf("db%02d.example-new%03d", n%20, n), 1, fleetVolume(n, "/data0"))
					report(t, st, fmt.Sprintf("agent%02d", n%20), fmt.Sprintf("db%02d.example", n%20), uint64(n+2),
						fleetVolume(3*(n%20), "/data0"), fleetVolume(3*(n%20)+1, "/data1"), fleetVolume(3*(n%20)+2, "/data2"))
				}
			})
			for _, sort := range []string{"host", "-split_fraction", "verdict"} {
				seen := map[string]int{}
				for _, id := range ids(list(t, srv.URL, "sort="+sort, 3)) {
					seen[id]++
				}
				for id, n := range seen {
					if n > 1 {
						t.Errorf("sort=%s: volume %s on %d pages", sort, id, n)
					}
				}
				for _, id := range before {
					if seen[id] != 1 {
						t.Errorf("sort=%s: volume %s missing from the walk", sort, id)
					}
				}
			}
			cancel()
			wg.Wait()
			// Within the staleness bound (one SyncPeriod and a sync).
			deadline := time.Now().Add(5 * time.Second)
			for {
				after := ids(list(t, srv.URL, "", 1000))
				if len(after) > len(before) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%d volumes after the reports, %d before: the writer stored nothing new", len(after), len(before))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestCSV checks columns, one row per volume, escaping of commas, quotes
// and formula-like cells, and Accept: text/csv.
func TestCSV(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 3, 2)
			report(t, st, "evil", `=HYPERLINK("x"),db`, 1, fleetVolume(0, `/data,"quoted"`))
			srv := serveSyncing(t, st, Options{SyncPeriod: 0})
			defer srv.Close()
			for _, how := range []struct{ query, accept string }{{"?format=csv", ""}, {"", "text/csv"}, {"?format=csv&verdict=misaligned", ""}} {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/volumes"+how.query, nil)
				if how.accept != "" {
					req.Header.Set("Accept", how.accept)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
					t.Fatalf("%s %s: %d %s", how.query, how.accept, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
				if err != nil {
					t.Fatalf("CSV does not parse: %v\n%s", err, body)
				}
				if diff := gocmp.Diff(VolumeCSVColumns(), recs[0]); diff != "" {
					t.Errorf("header (-want +got):\n%s", diff)
				}
				want := 7
				if strings.Contains(how.query, "misaligned") {
					want = 0
					for _, v := range list(t, srv.URL, "verdict=misaligned", 100) {
						_ = v
						want++
					}
				}
				if len(recs)-1 != want {
					t.Errorf("%s: %d rows, want %d", how.query, len(recs)-1, want)
				}
				col := func(r []string, name string) string { return r[slices.Index(VolumeCSVColumns(), name)] }
				for _, r := range recs[1:] {
					if col(r, "agent_id") != "evil" {
						continue
					}
					if col(r, "host") != `'=HYPERLINK("x"),db` || col(r, "mount_point") != `/data,"quoted"` {
						t.Errorf("escaping: host %q mount_point %q", col(r, "host"), col(r, "mount_point"))
					}
					if col(r, "verdict") != "misaligned" || col(r, "data_offset_bytes") != "32256" || col(r, "finding_rule") == "" || col(r, "remediation") == "" {
						t.Errorf("change-ticket columns: %v", r)
					}
					// xfs with 4 KiB blocks at 31.5 KiB on a 64 KiB stripe: the
					// split by cause, offset and allocation grid.
					got := []string{col(r, "split_fraction_8k"), col(r, "split_fraction_64k"), col(r, "granularity_split_fraction_8k"), col(r, "granularity_split_fraction_64k")}
					if diff := gocmp.Diff([]string{"0.0625", "0.0625", "0.0625", "0.9375"}, got); diff != "" {
						t.Errorf("split columns (offset 8K, 64K, granularity 8K, 64K) (-want +got):\n%s", diff)
					}
				}
			}
			// A CSV page carries the next token in a header.
			resp, err := http.Get(srv.URL + "/api/v1/volumes?format=csv&limit=2")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.Header.Get("X-Next-Page-Token") == "" {
				t.Error("CSV page of 2 of 7: no X-Next-Page-Token")
			}
			resp, err = http.Get(srv.URL + "/api/v1/hosts?format=csv")
			if err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(resp.Body).ReadAll()
			resp.Body.Close()
			if err != nil || len(recs) != 5 || !slices.Equal(recs[0], HostCSVColumns()) {
				t.Errorf("hosts CSV: %v %v", recs, err)
			}
		})
	}
}

// TestBadParameters: every bad parameter is a 400 naming it, with the
// allowed values of an enumeration; never a 500.
func TestBadParameters(t *testing.T) {
	t.Parallel()
	st := openStore(t, "sqlite://"+t.TempDir()+"/p.db")
	seedFleet(t, st, 2, 2)
	srv := serveSyncing(t, st, Options{SyncPeriod: 0})
	defer srv.Close()
	code, body := get(t, srv.URL+"/api/v1/volumes?limit=1")
	other, _ := body["next_page_token"].(string)
	tests := []struct {
		path, param string
		allowed     bool
	}{
		{"/api/v1/volumes?verdict=wonky", "verdict", true},
		{"/api/v1/volumes?verdit=aligned", "verdit", true},
		{"/api/v1/volumes?raid_level=raid7", "raid_level", true},
		{"/api/v1/volumes?media=floppy", "media", true},
		{"/api/v1/volumes?rule=nope", "rule", true},
		{"/api/v1/volumes?severity=meh", "severity", true},
		{"/api/v1/volumes?degraded=yes", "degraded", true},
		{"/api/v1/volumes?sort=color", "sort", true},
		{"/api/v1/volumes?sort=--host", "sort", true},
		{"/api/v1/volumes?format=xml", "format", true},
		{"/api/v1/volumes?io_size_bytes=4096&min_split_fraction=0", "io_size_bytes", true},
		{"/api/v1/volumes?io_size_bytes=8192", "io_size_bytes", false},
		{"/api/v1/volumes?limit=0", "limit", false},
		{"/api/v1/volumes?limit=100000", "limit", false},
		{"/api/v1/volumes?limit=ten", "limit", false},
		{"/api/v1/volumes?stripe_unit_bytes=-1", "stripe_unit_bytes", false},
		{"/api/v1/volumes?data_offset_bytes=1e3", "data_offset_bytes", false},
		{"/api/v1/volumes?min_split_fraction=1.5", "min_split_fraction", false},
		{"/api/v1/volumes?min_split_fraction=NaN", "min_split_fraction", false},
		{"/api/v1/volumes?host=", "host", false},
		{"/api/v1/volumes?host=a&host=b", "host", false},
		{"/api/v1/volumes?next_page_token=garbage!", "next_page_token", false},
		{"/api/v1/volumes?next_page_token=" + other + "&sort=-host", "next_page_token", false},
		{"/api/v1/volumes?next_page_token=eyJ2IjoxLCJoIjoxLCJrIjpbMV19", "next_page_token", false},
		{"/api/v1/volumes/0123456789abcdef?x=1", "x", true},
		{"/api/v1/hosts?sort=os", "sort", true},
		{"/api/v1/hosts?verdict=aligned", "verdict", true},
		{"/api/v1/summary?top=1000", "top", false},
		{"/api/v1/summary?limit=5", "limit", true},
	}
	_ = code
	// An empty next_page_token is the first page (the OpenAPI allows it).
	for _, path := range []string{"/api/v1/volumes?limit=1", "/api/v1/hosts?limit=1"} {
		_, first := get(t, srv.URL+path)
		code, body := get(t, srv.URL+path+"&next_page_token=")
		if code != http.StatusOK || fmt.Sprint(body) != fmt.Sprint(first) {
			t.Errorf("GET %s&next_page_token= = %d %v, want 200 and the first page %v", path, code, body, first)
		}
	}
	for _, tt := range tests {
		code, body := get(t, srv.URL+tt.path)
		if code != http.StatusBadRequest || body["parameter"] != tt.param || body["error"] == nil {
			t.Errorf("GET %s = %d %v, want 400 naming %q", tt.path, code, body, tt.param)
			continue
		}
		if _, ok := body["allowed"].([]any); ok != tt.allowed {
			t.Errorf("GET %s: allowed = %v, want a list: %v", tt.path, body["allowed"], tt.allowed)
		}
	}
	for _, p := range []string{"/api/v1/volumes/0123456789abcdef", "/api/v1/volumes/..%2F..", "/api/v1/hosts/nohost"} {
		if code, body := get(t, srv.URL+p); code != http.StatusNotFound || body["error"] == nil {
			t.Errorf("GET %s = %d %v, want 404", p, code, body)
		}
	}
}

// TestAuth: with tokens configured every API path needs one of them;
// health stays open.
func TestAuth(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 1, 1)
			srv := serveSyncing(t, st, Options{Tokens: []Token{{Name: "grafana", Secret: "t1"}, {Name: "cli", Secret: "t2"}}, SyncPeriod: 0})
			defer srv.Close()
			code, body := get(t, srv.URL+"/api/v1/volumes", "Authorization", "Bearer t2")
			if code != 200 {
				t.Fatalf("with token: %d %v", code, body)
			}
			id := body["volumes"].([]any)[0].(map[string]any)["id"].(string)
			for _, p := range []string{"/api/v1/volumes", "/api/v1/volumes/" + id, "/api/v1/hosts", "/api/v1/hosts/agent00",
				"/api/v1/summary", "/api/v1/openapi.yaml", "/api/v1/volumes?format=csv"} {
				for _, h := range [][]string{nil, {"Authorization", "Bearer t3"}, {"Authorization", "t1"}, {"Authorization", "Basic dDE6dDE="}} {
					req, _ := http.NewRequest("GET", srv.URL+p, nil)
					if h != nil {
						req.Header.Set(h[0], h[1])
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("GET %s with %v = %d, want 401 with WWW-Authenticate", p, h, resp.StatusCode)
					}
				}
				for _, tok := range []string{"t1", "t2"} {
					req, _ := http.NewRequest("GET", srv.URL+p, nil)
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("GET %s with token %s = %d, want 200", p, tok, resp.StatusCode)
					}
				}
			}
			for _, p := range []string{"/healthz", "/readyz"} {
				if code, _ := get(t, srv.URL+p); code != 200 {
					t.Errorf("GET %s without a token = %d, want 200", p, code)
				}
			}
		})
	}
}

// serveRunning serves the API over st with Run keeping it up to date in
// the background, as the server does; both stop at the end of the test.
func serveRunning(t *testing.T, st *store.Store, opts Options) (*httptest.Server, *API) {
	t.Helper()
	api := New(st, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); api.Run(ctx) }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return srv, api
}

// serveSyncing serves the API over st, syncing its projection (and so
// its summary index) before each request — the test plays the loop that
// keeps them current: for tests of what the API answers, not of when it
// sees a change.
func serveSyncing(t *testing.T, st *store.Store, opts Options) *httptest.Server {
	t.Helper()
	api := New(st, opts)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := api.Sync(r.Context(), false); err != nil {
			t.Errorf("sync before %s: %v", r.URL, err)
		}
		api.ServeHTTP(w, r)
	}))
}
