package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{[]string{"run", "--config", bad, "--check"}, 1, `server.address "nope"`},
		{[]string{"run", "--config", bad, "--check"}, 1, "spool.dir: required"},
		{[]string{"run", "--config", bad, "--check"}, 1, "server.tls.ca_file: required"},
		{[]string{"run", "--check"}, 2, "usage: agent run"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.phrase) {
			t.Errorf("agent %v = %d, %q%q; want %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.phrase)
		}
	}
}
