package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/render"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestMain(m *testing.M) {
	code := m.Run()
	benchCleanup()
	pgtest.Stop()
	os.Exit(code)
}

// engines: every store-backed test runs against a real SQLite file and a
// real PostgreSQL.
var engines = pgtest.Engines()

func u64(v uint64) *uint64 { return &v }

// volume is a RAID 10 volume with a partition at 31.5 KiB that the agent
// claims is aligned.
func volume(mp string) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "xfs", BlockSizeBytes: 4096, OffsetBytes: u64(0)},
			{Kind: "partition", Device: "sdb1", OffsetBytes: u64(32256), LogicalSectorBytes: 512},
			{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared"},
		},
		Alignment: &plumblinev1.Alignment{Verdict: "aligned"},
	}
}

// seed stores one geometry snapshot of agent id through the server's own
// validation (ingest.ValidateReport), into a real store.
func seed(t *testing.T, st *store.Store, id string, vols ...*plumblinev1.Volume) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example", OS: "linux", Kernel: "6.1", AgentVersion: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
		Sequence: 1, ProducedAt: timestamppb.Now(),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: id + ".example", Os: "linux"}, Volumes: vols}}},
	}}}
	b, err := ingest.ValidateReport(req, ingest.Limits{}, time.Now())
	if err != nil || len(b.Rejections) > 0 {
		t.Fatalf("ValidateReport: %v %v", err, b.Rejections)
	}
	if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q, want JSON", req.Method, req.URL.Path, ct)
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s %s: not JSON: %v\n%s", req.Method, req.URL.Path, err, body)
	}
	return resp.StatusCode, out
}

func TestVolumesAndHosts(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st, err := store.Open(context.Background(), e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			seed(t, st, "db2", volume("/data"), volume("/log"))
			seed(t, st, "db1", volume("/data"))
			srv := serveSyncing(t, st, Options{})
			defer srv.Close()

			code, body := get(t, srv.URL+"/api/v1/volumes")
			if code != http.StatusOK {
				t.Fatalf("GET /api/v1/volumes: %d %v", code, body)
			}
			vols, _ := body["volumes"].([]any)
			if len(vols) != 3 {
				t.Fatalf("%d volumes, want 3: %v", len(vols), body)
			}
			var got [][2]string
			for _, v := range vols {
				m := v.(map[string]any)
				got = append(got, [2]string{m["host"].(string), m["mount_point"].(string)})
			}
			if diff := cmp.Diff([][2]string{{"db1.example", "/data"}, {"db2.example", "/data"}, {"db2.example", "/log"}}, got); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			v := vols[0].(map[string]any)
			al := v["alignment"].(map[string]any)
			if al["verdict"] != "misaligned" || al["data_offset_bytes"] != json.Number("32256") {
				t.Errorf("alignment = %v; want the server's verdict misaligned at data_offset_bytes 32256 (a number)", al)
			}
			// 31.5 KiB on a 64 KiB stripe with 4 KiB blocks: 12.5% of 8 KiB
			// I/Os split, half of them because of the offset, half at any
			// offset because of the 4 KiB allocation grid.
			if sf := al["split_fraction"].(map[string]any); sf["8192"] != json.Number("0.0625") {
				t.Errorf("split_fraction = %v, want 8192: 0.0625 (the offset's share)", sf)
			}
			if gf, _ := al["granularity_split_fraction"].(map[string]any); gf["8192"] != json.Number("0.0625") || gf["65536"] != json.Number("0.9375") {
				t.Errorf("granularity_split_fraction = %v, want 8192: 0.0625, 65536: 0.9375", gf)
			}
			// Same shape as `agent inspect --format json` for the volume.
			want := volume("/data")
			want.Alignment = nil
			inspect := decode(t, mustJSON(t, want))
			for k, w := range inspect {
				if diff := cmp.Diff(w, v[k]); diff != "" {
					t.Errorf("volume key %q differs from the inspect shape (-inspect +api):\n%s", k, diff)
				}
			}
			for _, k := range []string{"agent_id", "sequence", "observed_at", "layers", "filesystem"} {
				if _, ok := v[k]; !ok {
					t.Errorf("volume has no %q: %v", k, v)
				}
			}

			code, body = get(t, srv.URL+"/api/v1/hosts")
			hosts, _ := body["hosts"].([]any)
			if code != http.StatusOK || len(hosts) != 2 {
				t.Fatalf("GET /api/v1/hosts: %d %v", code, body)
			}
			h := hosts[0].(map[string]any)
			if h["agent_id"] != "db1" || h["hostname"] != "db1.example" || h["os"] != "linux" || h["high_water_sequence"] != json.Number("1") {
				t.Errorf("hosts[0] = %v", h)
			}
		})
	}
}

func mustJSON(t *testing.T, v *plumblinev1.Volume) []byte {
	b, err := render.JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEmptyListsAndErrors(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	api := New(st, Options{BearerToken: "s3cret", ReadyWait: time.Millisecond})
	srv := httptest.NewServer(api)
	defer srv.Close()
	auth := []string{"Authorization", "Bearer s3cret"}
	// Before the first summary index (nothing has synced): 503, never a
	// sync of the request's own.
	for _, path := range []string{"/api/v1/volumes", "/api/v1/hosts", "/api/v1/summary", "/api/v1/hosts/db1", "/readyz"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set(auth[0], auth[1])
		code, body := do(t, req)
		if msg, _ := body["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "not ready") {
			t.Errorf("GET %s before the first sync = %d %v, want 503 not ready", path, code, body)
		}
	}
	if err := api.Sync(context.Background(), true); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		method, path string
		header       []string
		code         int
		key, want    string
	}{
		{"GET", "/api/v1/hosts", auth, 200, "hosts", "[]"},
		{"GET", "/api/v1/volumes", auth, 200, "volumes", "[]"},
		{"GET", "/api/v1/volumes", nil, 401, "error", "bearer token"},
		{"GET", "/api/v1/volumes", []string{"Authorization", "Bearer nope"}, 401, "error", "bearer token"},
		{"POST", "/api/v1/volumes", auth, 405, "error", "method POST not allowed"},
		{"GET", "/api/v1/nothing", auth, 404, "error", "no API endpoint /api/v1/nothing"},
		{"GET", "/elsewhere", nil, 404, "error", "not found"},
		{"GET", "/healthz", nil, 200, "status", "ok"},
		{"GET", "/readyz", nil, 200, "status", "ready"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			req.Header.Set(tt.header[i], tt.header[i+1])
		}
		code, body := do(t, req)
		got, _ := json.Marshal(body[tt.key])
		if code != tt.code || !strings.Contains(string(got), tt.want) {
			t.Errorf("%s %s = %d %s, want %d with %s %q", tt.method, tt.path, code, got, tt.code, tt.key, tt.want)
		}
	}
	st.Close() // the store goes away: not ready, still healthy
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || body["error"] == nil {
		t.Errorf("GET /readyz with the store closed = %d %v, want 503 with an error", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz with the store closed = %d, want 200", code)
	}
}

// TestGivenProjection: an API over a projection its owner runs reads
// what that projection writes — reads wait for nothing but the API's own
// summary index, a later snapshot shows within the projection's sync
// period — and the API's Run only keeps its summary index (it leaves
// syncing to the owner).
func TestGivenProjection(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 2, 2)
			p := projection.New(st, projection.Options{SyncPeriod: 5 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			defer func() { cancel(); <-done }()
			srv, _ := serveRunning(t, st, Options{Projection: p, SyncPeriod: 5 * time.Millisecond})
			waitFor(t, "4 volumes", func() bool { return len(list(t, srv.URL, "", 100)) == 4 })
			report(t, st, "agent09", "db09.example", 1, fleetVolume(0, "/data0"))
			waitFor(t, "a new host's volume", func() bool { return len(list(t, srv.URL, "", 100)) == 5 })
			waitFor(t, "a new host's volume in the summary", func() bool { return num64(summaryAt(t, srv.URL, "")["volumes"]) == 5 })
		})
	}
}

// waitFor polls cond until it holds, failing after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s: not seen after 30 s", what)
		}
	}
}
