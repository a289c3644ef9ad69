package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWebConfigTLSAndBasicAuth serves the HTTP listener with an
// exporter-toolkit web config: TLS and basic auth on every path.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := devca.Create(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	crt, key := filepath.Join(dir, "web.crt"), filepath.Join(dir, "web.key")
	if err := leaf.WriteFiles(crt, key); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pa55"), bcrypt.MinCost)
	webYML := writeFile(t, dir, "web.yml", "tls_server_config:\n  cert_file: "+crt+"\n  key_file: "+key+"\nbasic_auth_users:\n  ops: "+string(hash)+"\n")
	cfgYML := writeFile(t, dir, "server.yaml", "data_dir: "+dir+"\ngrpc:\n  insecure: true\n  listen_address: 127.0.0.1:0\nweb:\n  listen_address: 127.0.0.1:0\n  config_file: "+webYML+"\n")
	if code := runContext(context.Background(), []string{"--config", cfgYML, "--config.check"}, &bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("--config.check = %d", code)
	}
	p := startInProcess(t, "--config", cfgYML)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	for _, tt := range []struct {
		path, user, pass string
		code             int
	}{
		{"/api/v1/volumes", "ops", "pa55", 200},
		{"/api/v1/summary", "ops", "pa55", 200},
		{"/api/v1/volumes", "ops", "wrong", 401},
		{"/api/v1/volumes", "", "", 401},
		{"/healthz", "", "", 401},
	} {
		req, _ := http.NewRequest("GET", "https://"+p.webAddr+tt.path, nil)
		if tt.user != "" {
			req.SetBasicAuth(tt.user, tt.pass)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("GET https://%s%s as %q = %d, want %d", p.webAddr, tt.path, tt.user, resp.StatusCode, tt.code)
		}
	}
	if resp, err := http.Get("http://" + p.webAddr + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP answered 200 on a TLS listener")
	}
}

// TestInventoryCLI runs `server inventory list` against a dev server.
func TestInventoryCLI(t *testing.T) {
	dir := t.TempDir()
	p := startInProcess(t, "--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(dir, "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i, id := range []string{"cli-a", "cli-b"} {
		if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example"}); err != nil {
			t.Fatal(err)
		}
		v := misaligned("/data")
		if i == 1 {
			v.Layers[1].OffsetBytes = u64(1 << 20)
		}
		b, err := ingest.ValidateReport(&plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{Sequence: 1, ProducedAt: timestamppb.Now(),
			Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
				Inventory: &plumblinev1.Inventory{Volumes: []*plumblinev1.Volume{v}}}}}}}, ingest.Limits{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := runContext(ctx, []string{"inventory", "list", "--url", "http://" + p.webAddr, "--verdict", "misaligned"}, &out, &errb, nil); code != 0 {
		t.Fatalf("inventory list = %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "cli-a.example") || strings.Contains(out.String(), "cli-b.example") {
		t.Errorf("inventory list --verdict misaligned:\n%s", out.String())
	}
	// Sizes as `agent inspect` writes them, never raw bytes; one marker
	// for unknown values.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("inventory list: want a header and one row:\n%s", out.String())
	}
	row := strings.Fields(lines[1])
	if row[3] != "31.5KiB" || row[4] != "64KiB" {
		t.Errorf("offset, stripe unit = %q, %q; want 31.5KiB, 64KiB:\n%s", row[3], row[4], out.String())
	}
	for _, c := range row {
		if c == "0" || c == "32256" || c == "65536" {
			t.Errorf("a raw byte count or 0-for-unknown in the table: %q\n%s", c, out.String())
		}
	}
	// Filters: the hyphenated flag, the old underscore spelling (hidden),
	// and a size for a *-bytes filter.
	for _, args := range [][]string{{"--data-offset-bytes", "32256"}, {"--data_offset_bytes", "32256"}, {"--data-offset-bytes", "1MiB"}, {"--stripe-unit-bytes", "64k"}} {
		out.Reset()
		if code := runContext(ctx, append([]string{"inventory", "list", "--url", "http://" + p.webAddr, "--format", "json"}, args...), &out, &errb, nil); code != 0 {
			t.Fatalf("inventory list %v = %d: %s", args, code, errb.String())
		}
		want := map[string][]string{"32256": {"cli-a"}, "1MiB": {"cli-b"}, "64k": {"cli-a", "cli-b"}}[args[1]]
		if n := strings.Count(out.String(), "\n"); n != len(want) {
			t.Errorf("inventory list %v: %d volumes, want %d (%v):\n%s", args, n, len(want), want, out.String())
		}
		for _, host := range want {
			if !strings.Contains(out.String(), host+".example") {
				t.Errorf("inventory list %v: %s missing:\n%s", args, host, out.String())
			}
		}
	}
	out.Reset()
	errb.Reset()
	runContext(ctx, []string{"inventory", "list", "--help"}, &out, &errb, nil)
	if help := errb.String(); !strings.Contains(help, "-data-offset-bytes") || strings.Contains(help, "data_offset_bytes") || !strings.Contains(help, "-token-file") {
		t.Errorf("inventory list --help lists one flag style only; got:\n%s", help)
	}
	out.Reset()
	if code := runContext(ctx, []string{"inventory", "list", "--url", "http://" + p.webAddr, "--format", "csv"}, &out, &errb, nil); code != 0 ||
		!strings.HasPrefix(out.String(), "id,host,") || strings.Count(out.String(), "\n") != 3 {
		t.Errorf("inventory list --format csv = %d:\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := runContext(ctx, []string{"inventory", "list", "--url", "http://" + p.webAddr, "--verdict", "crooked"}, &out, &errb, nil); code != 1 ||
		!strings.Contains(errb.String(), "allowed: aligned, misaligned, unknown") {
		t.Errorf("inventory list --verdict crooked = %d: %s", code, errb.String())
	}
}
