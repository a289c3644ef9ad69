package inventory

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/api"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// seedProbe stores one probe result of agent id's volume mp.
func seedProbe(t testing.TB, st *store.Store, id, mp string, seq uint64) {
	t.Helper()
	h := &histogram.Histogram{}
	for i := range 100 {
		h.Observe(time.Duration(100+i) * time.Microsecond)
	}
	hb, err := proto.Marshal(wire.HistogramToProto(h))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.AppendBatch(context.Background(), id, []store.Record{{
		Sequence: seq, Kind: store.KindProbe, ProducedAt: time.Now(), Payload: []byte{},
		Probe: &store.ProbeResult{MountPoint: mp, Device: "/dev/sdb1", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1,
			StartedAt: time.Now().Add(-time.Minute), Duration: 10 * time.Second, Ops: 100, Bytes: 819200, Histogram: hb,
			// Made while md0 recovered: the volume detail shows the mark.
			ArrayActivity: []store.ArrayActivity{{Device: "md0", Action: "recover", DoneSectors: 430, TotalSectors: 1000, SpeedBytesPerSecond: 50 << 20}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPIContract sends real requests, good and bad, to the API on
// both engines and validates every response against api/openapi.yaml.
func TestOpenAPIContract(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/yaml", openapi3filter.FileBodyDecoder)
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 4, 2)
			// A re-format and a new partition: history entries.
			v := fleetVolume(0, "/data0")
			v.Filesystem.Uuid = "uuid-new"
			v.Layers[1].OffsetBytes = u64(1 << 20)
			report(t, st, "agent00", "db00.example", 2, v, fleetVolume(1, "/data1"))
			seedProbe(t, st, "agent00", "/data0", 3)
			// A volume judged with the geometry probe's inferred stripe unit.
			reportMeasured(t, st, "hidden", "hw01.example", 1,
				map[string]*plumblinev1.StripeMeasurement{"/data": stripeScan("sdc", align.BasisDisk)}, hiddenStripeVolume("/data"))
			measuredID := store.VolumeID("hidden", "/data")
			if err := st.PutBaselineStates(context.Background(), []store.BaselineState{
				{AgentID: "agent00", MountPoint: "/data0", State: "degraded", Degraded: true, Reason: "p95 3x cohort", UpdatedAt: time.Now()},
				{AgentID: "agent00", MountPoint: "/data1", State: "rebuilding", Reason: "rebuilding, 43% done: md0 recover at 50.0 MiB/s", UpdatedAt: time.Now()},
			}); err != nil {
				t.Fatal(err)
			}
			srv := serveSyncing(t, st, Options{Tokens: []Token{{Name: "test", Secret: "tok"}}, SyncPeriod: 0})
			defer srv.Close()
			_, body := get(t, srv.URL+"/api/v1/volumes?host=db00.example&mount_point=/data0", "Authorization", "Bearer tok")
			id := body["volumes"].([]any)[0].(map[string]any)["id"].(string)
			_, body = get(t, srv.URL+"/api/v1/volumes?limit=2", "Authorization", "Bearer tok")
			next := body["next_page_token"].(string)

			paths := []struct {
				path    string
				auth    bool
				accept  string
				code    int
				checkFn func(t *testing.T, body []byte)
			}{
				{"/api/v1/volumes", true, "", 200, nil},
				{"/api/v1/volumes?verdict=misaligned&sort=-split_fraction&limit=3", true, "", 200, nil},
				{"/api/v1/volumes?limit=2&next_page_token=" + next, true, "", 200, nil},
				{"/api/v1/volumes?format=csv", true, "", 200, nil},
				{"/api/v1/volumes", true, "text/csv", 200, nil},
				{"/api/v1/volumes/" + id, true, "", 200, func(t *testing.T, b []byte) {
					for _, want := range []string{`"kind": "reformat"`, `"kind": "new-partition"`, `"p99"`, `"degraded": true`,
						`"array_activity": [`, `"action": "recover"`} {
						if !bytes.Contains(b, []byte(want)) {
							t.Errorf("volume detail has no %s:\n%s", want, b)
						}
					}
				}},
				{"/api/v1/volumes/" + measuredID, true, "", 200, func(t *testing.T, b []byte) {
					for _, want := range []string{`"stripe_unit_source": "measured"`, `"stripe_unit_confidence": 0.998`, `"measured_split_cost_seconds": 0.0008`,
						`"measured_split_cost_low_seconds"`, `"measured_split_cost_high_seconds"`, `"measured_penalty_seconds": {`, `"measured_stripe": {`} {
						if !bytes.Contains(b, []byte(want)) {
							t.Errorf("measured volume detail has no %s:\n%s", want, b)
						}
					}
				}},
				{"/api/v1/volumes?host=hw01.example", true, "", 200, func(t *testing.T, b []byte) {
					if !bytes.Contains(b, []byte(`"measured_penalty_seconds":{`)) {
						t.Errorf("measured volume in a page has no measured_penalty_seconds:\n%s", b)
					}
				}},
				{"/api/v1/volumes/ffffffffffffffff", true, "", 404, nil},
				{"/api/v1/volumes?verdict=bad", true, "", 400, nil},
				{"/api/v1/volumes", false, "", 401, nil},
				{"/api/v1/hosts", true, "", 200, nil},
				{"/api/v1/hosts?host=db0*&sort=-host&limit=2", true, "", 200, nil},
				{"/api/v1/hosts?format=csv", true, "", 200, nil},
				{"/api/v1/hosts/agent01", true, "", 200, nil},
				{"/api/v1/hosts/db02.example", true, "", 200, nil},
				{"/api/v1/hosts/nobody", true, "", 404, nil},
				{"/api/v1/summary", true, "", 200, nil},
				{"/api/v1/summary?raid_level=raid10&top=3", true, "", 200, nil},
				{"/api/v1/summary?top=-1", true, "", 400, nil},
				{"/api/v1/openapi.yaml", true, "", 200, nil},
				{"/healthz", false, "", 200, nil},
				{"/readyz", false, "", 200, nil},
			}
			for _, p := range paths {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+p.path, nil)
				if p.auth {
					req.Header.Set("Authorization", "Bearer tok")
				}
				if p.accept != "" {
					req.Header.Set("Accept", p.accept)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != p.code {
					t.Errorf("GET %s = %d, want %d: %s", p.path, resp.StatusCode, p.code, b)
					continue
				}
				if p.checkFn != nil {
					p.checkFn(t, b)
				}
				// Validate against the document, as served under "/".
				vreq, _ := http.NewRequest(http.MethodGet, p.path, nil)
				vreq.Header = req.Header
				route, params, err := router.FindRoute(vreq)
				if err != nil {
					t.Errorf("GET %s: no route in api/openapi.yaml: %v", p.path, err)
					continue
				}
				in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
					Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
				if p.code < 400 {
					if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
						t.Errorf("GET %s: request does not match the document: %v", p.path, err)
					}
				}
				out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
					Body: io.NopCloser(bytes.NewReader(b)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
				if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
					t.Errorf("GET %s: response %d does not match api/openapi.yaml: %v\n%.600s", p.path, resp.StatusCode, err, b)
				}
			}
		})
	}
}

// TestOpenAPIVolumeFields: api/openapi.yaml documents every field of
// plumblinev1.Volume, its Alignment (the verdict) and its
// StripeMeasurement, so a field added to the proto (the measured split
// cost, its penalty per I/O size, the stripe unit's confidence) is
// described where clients read.
func TestOpenAPIVolumeFields(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for schemaName, msg := range map[string]proto.Message{
		"Volume": &plumblinev1.Volume{}, "Alignment": &plumblinev1.Alignment{}, "StripeMeasurement": &plumblinev1.StripeMeasurement{},
	} {
		schema := doc.Components.Schemas[schemaName]
		if schema == nil || schema.Value == nil {
			t.Errorf("api/openapi.yaml: no %s schema", schemaName)
			continue
		}
		fields := msg.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			name := string(fields.Get(i).Name())
			if _, ok := schema.Value.Properties[name]; !ok {
				t.Errorf("api/openapi.yaml %s has no property %s (%s field %d)", schemaName, name, msg.ProtoReflect().Descriptor().FullName(), fields.Get(i).Number())
			}
		}
	}
}
