package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/agent"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("agent_id: db1\nserver: {address: '127.0.0.1:7443', insecure: true}\nspool: {dir: "+dir+"/spool}\n"), 0o600)
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("server: {address: nope}\nspool: {max_bytes: 1KiB}\n"), 0o600)
	for _, tc := range []struct {
		args   []string
		code   int
		phrase string
	}{
		{[]string{"run", "--config", good, "--check"}, 0, "valid (agent db1"},
		// A minimal file says what it leaves off.
		{[]string{"run", "--config", good, "--check"}, 0, "not configured: probes, declared_devices, maintenance_windows, labels\n"},
		{[]string{"run", "--config", bad, "--check"}, 1, `server.address "nope"`},
		{[]string{"run", "--config", bad, "--check"}, 1, "spool.dir: required"},
		{[]string{"run", "--config", bad, "--check"}, 1, "server.tls.ca_file: required"},
		{[]string{"run", "--check"}, 2, "usage: agent run"},
	} {
		var out, errb bytes.Buffer
		code := run(t.Context(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.phrase) {
			t.Errorf("agent %v = %d, %q%q; want %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.phrase)
		}
	}
}

// --print-config: the file merged with the central policy cached in the
// spool directory, with where each key came from.
func TestRunPrintConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yml")
	os.WriteFile(cfg, []byte("agent_id: db1\nserver: {address: '127.0.0.1:7443', insecure: true}\nspool: {dir: "+dir+"}\n"+
		"maintenance_windows: [{name: local-patch, schedule: '0 3 * * 6', duration: 1h}]\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"run", "--config", cfg, "--print-config"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "No central policy") ||
		!strings.Contains(out.String(), "name: local-patch") {
		t.Fatalf("--print-config without a cache = %d, %s%s", code, out.String(), errb.String())
	}
	frag := "probes: [{mount_point: /data, dir: /data/.p, every: 7m}]\nmaintenance_windows: [{name: backup, schedule: '0 1 * * *', duration: 2h, time_zone: Asia/Tokyo}]\n"
	b, err := proto.Marshal(&plumblinev1.AgentPolicy{ConfigYaml: []byte(frag), Digest: make([]byte, 32), Sources: []string{"fleet"}})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, agent.PolicyCacheFile), b, 0o600)
	out.Reset()
	code := run(t.Context(), []string{"run", "--config", cfg, "--print-config"}, &out, &errb)
	for _, want := range []string{"[fleet]", "probes:              central", "local + central", "every: 7m0s", "name: local-patch", "time_zone: Asia/Tokyo", "ops: 50"} {
		if code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("--print-config with a cached policy = %d, lacks %q:\n%s%s", code, want, out.String(), errb.String())
		}
	}
}
