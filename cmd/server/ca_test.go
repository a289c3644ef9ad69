package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// caInit runs `server ca init` with args and returns its output.
func caInit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = runContext(t.Context(), append([]string{"ca", "init"}, args...), &o, &e, nil)
	return code, o.String(), e.String()
}

// printedBlock is the YAML `ca init` prints after "set in server.yaml:".
func printedBlock(t *testing.T, out string) map[string]any {
	t.Helper()
	_, rest, ok := strings.Cut(out, "set in server.yaml:\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	var m map[string]any
	if err := yaml.Unmarshal([]byte(block), &m); !ok || err != nil || m == nil {
		t.Fatalf("no server.yaml block in the output (%v):\n%s", err, out)
	}
	return m
}

func field(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestCAInitFiles: the four files with their modes, a CA of ten years and
// a server certificate of one year for the names given; a second run
// refuses and changes nothing; without a name it refuses with a hint.
func TestCAInitFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	code, out, errOut := caInit(t, "--dir", dir, "--name", "plumbline.example.com", "--name", "10.0.0.5", "--ip", "::1")
	if code != 0 {
		t.Fatalf("ca init = %d: %s%s", code, out, errOut)
	}
	modes := map[string]os.FileMode{"ca.crt": 0o644, "ca.key": 0o600, "server.crt": 0o644, "server.key": 0o600}
	before := map[string][]byte{}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
		}
		before[name], _ = os.ReadFile(filepath.Join(dir, name))
	}
	if fi, err := os.Stat(dir); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o750 {
		t.Errorf("directory: %v, %v; want mode 0750", fi.Mode().Perm(), err)
	}
	ca, srv := readCert(t, filepath.Join(dir, "ca.crt")), readCert(t, filepath.Join(dir, "server.crt"))
	if !ca.IsCA || ca.NotAfter.Sub(ca.NotBefore) < 87600*time.Hour {
		t.Errorf("CA: IsCA %v, lifetime %s; want a CA of 87600h", ca.IsCA, ca.NotAfter.Sub(ca.NotBefore))
	}
	if life := srv.NotAfter.Sub(srv.NotBefore); life < 8760*time.Hour || life > 8762*time.Hour {
		t.Errorf("server certificate lifetime %s, want 8760h (and the backdating hour)", life)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"plumbline.example.com", "10.0.0.5", "::1"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if pin := field(out, "CA pin:"); !strings.HasPrefix(pin, "sha256:") || len(pin) != len("sha256:")+64 {
		t.Errorf("printed CA pin %q, want sha256:<64 hex digits>", pin)
	}

	code, out, errOut = caInit(t, "--dir", dir, "--name", "other.example.com")
	if code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("second ca init = %d: %s%s; want 1 and \"already exists\"", code, out, errOut)
	}
	for name := range modes {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(b, before[name]) {
			t.Errorf("%s changed by the refused ca init", name)
		}
	}
	// One file there: nothing is written either.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "server.key"), []byte("mine"), 0o600)
	if code, _, errOut = caInit(t, "--dir", dir2, "--name", "x.example.com"); code != 1 || !strings.Contains(errOut, "server.key already exists") {
		t.Errorf("ca init over a server.key = %d: %s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir2); len(ents) != 1 {
		t.Errorf("the refused ca init left %d files, want only server.key", len(ents))
	}
	if code, _, errOut = caInit(t, "--dir", t.TempDir()); code != 2 || !strings.Contains(errOut, "--name") {
		t.Errorf("ca init without a name = %d: %s", code, errOut)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCAInitProduction is the production path end to end: ca init, the
// real server (not --dev) started with the printed configuration, a join
// token, the real agent binary enrolling over TLS with the printed pin,
// and the agent, run with the config enroll printed, reporting: the
// server's hosts API lists it.
func TestCAInitProduction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent")
	}
	t.Parallel()
	tmp := t.TempDir()
	agentBin := buildAgent(t, tmp)
	code, out, errOut := caInit(t, "--dir", filepath.Join(tmp, "pki"), "--name", "localhost", "--ip", "127.0.0.1")
	if code != 0 {
		t.Fatalf("ca init = %d: %s%s", code, out, errOut)
	}
	pin := field(out, "CA pin:")
	cfg := printedBlock(t, out)
	cfg["data_dir"] = filepath.Join(tmp, "data")
	cfg["grpc"].(map[string]any)["listen_address"] = "127.0.0.1:0"
	cfg["web"] = map[string]any{"listen_address": "127.0.0.1:0"}
	cfg["agents"] = map[string]any{"report_interval": "1s"}
	serverYAML := writeYAML(t, filepath.Join(tmp, "server.yaml"), cfg)
	os.MkdirAll(filepath.Join(tmp, "data"), 0o700)
	srv := startInProcess(t, "--config", serverYAML)

	var tokOut, tokErr bytes.Buffer
	if code := runContext(t.Context(), []string{"token", "create", "--config", serverYAML}, &tokOut, &tokErr, nil); code != 0 {
		t.Fatalf("token create = %d: %s", code, tokErr.String())
	}
	if got := field(tokOut.String(), "ca-hash:"); got != pin {
		t.Errorf("token create's ca-hash %s, ca init printed %s", got, pin)
	}
	tokFile := filepath.Join(tmp, "join.token")
	os.WriteFile(tokFile, []byte(field(tokOut.String(), "token:")+"\n"), 0o600)

	enrollOut, err := exec.CommandContext(t.Context(), agentBin, "enroll", "--server", srv.grpcAddr, "--server-name", "localhost",
		"--token-file", tokFile, "--ca-hash", pin, "--dir", filepath.Join(tmp, "agent"), "--agent-id", "prod-1").CombinedOutput()
	if err != nil {
		t.Fatalf("agent enroll: %v\n%s", err, enrollOut)
	}
	var acfg map[string]any
	if err := yaml.Unmarshal(enrollOut, &acfg); err != nil {
		t.Fatalf("agent enroll's output is not YAML: %v\n%s", err, enrollOut)
	}
	acfg["spool"] = map[string]any{"dir": filepath.Join(tmp, "spool")}
	acfg["web"] = map[string]any{"listen_address": "127.0.0.1:0"}
	agentYAML := writeYAML(t, filepath.Join(tmp, "agent.yaml"), acfg)
	ctx, cancel := context.WithCancel(t.Context())
	agent := exec.CommandContext(ctx, agentBin, "run", "--config", agentYAML)
	var agentLog bytes.Buffer
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); agent.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var resp struct {
			Hosts []map[string]any `json:"hosts"`
		}
		getJSON(t, "http://"+srv.webAddr+"/api/v1/hosts", &resp)
		hosts := resp.Hosts
		if len(hosts) > 0 && hosts[0]["agent_id"] == "prod-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the enrolled agent did not report in 60s: hosts %v\nagent log:\n%s", hosts, agentLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// ca renew: the running server presents the new certificate to the
	// next connection.
	var renewOut, renewErr bytes.Buffer
	if code := runContext(t.Context(), []string{"ca", "renew", "--dir", filepath.Join(tmp, "pki")}, &renewOut, &renewErr, nil); code != 0 {
		t.Fatalf("ca renew = %d: %s%s", code, renewOut.String(), renewErr.String())
	}
	renewed := readCert(t, filepath.Join(tmp, "pki", "server.crt"))
	waitPresented(t, srv.grpcAddr, renewed)
}

// waitPresented polls until the server at addr presents cert.
func waitPresented(t *testing.T, addr string, cert *x509.Certificate) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13})
		if err == nil {
			got := c.ConnectionState().PeerCertificates[0]
			c.Close()
			if got.Equal(cert) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not present the renewed certificate (serial %x) after 30s: %v", cert.SerialNumber, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCARenew: renew replaces the server certificate and key with a new
// pair from the same CA, for the same names (or the ones given), and
// leaves the CA as it was; without a CA it refuses.
func TestCARenew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, out, errOut := caInit(t, "--dir", dir, "--name", "a.example.com", "--ip", "10.1.1.1"); code != 0 {
		t.Fatalf("ca init = %d: %s%s", code, out, errOut)
	}
	read := func(name string) []byte { b, _ := os.ReadFile(filepath.Join(dir, name)); return b }
	caCert, caKey, oldKey := read("ca.crt"), read("ca.key"), read("server.key")
	old := readCert(t, filepath.Join(dir, "server.crt"))
	renew := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := runContext(t.Context(), append([]string{"ca", "renew", "--dir", dir}, args...), &o, &e, nil)
		return code, o.String() + e.String()
	}
	if code, out := renew("--server-validity", "2h"); code != 0 || !strings.Contains(out, "renewed") {
		t.Fatalf("ca renew = %d: %s", code, out)
	}
	got := readCert(t, filepath.Join(dir, "server.crt"))
	if got.Equal(old) || bytes.Equal(read("server.key"), oldKey) {
		t.Error("ca renew kept the old certificate or key")
	}
	if strings.Join(got.DNSNames, ",") != "a.example.com" || len(got.IPAddresses) != 1 || !got.IPAddresses[0].Equal(old.IPAddresses[0]) {
		t.Errorf("renewed names %v %v, want the old ones %v %v", got.DNSNames, got.IPAddresses, old.DNSNames, old.IPAddresses)
	}
	if life := got.NotAfter.Sub(got.NotBefore); life != 3*time.Hour { // 2h and the backdating hour
		t.Errorf("renewed lifetime %s, want 2h (and the backdating hour)", life)
	}
	if err := got.CheckSignatureFrom(readCert(t, filepath.Join(dir, "ca.crt"))); err != nil {
		t.Errorf("the renewed certificate is not the CA's: %v", err)
	}
	if !bytes.Equal(read("ca.crt"), caCert) || !bytes.Equal(read("ca.key"), caKey) {
		t.Error("ca renew changed the CA")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "server.key")); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("renewed server.key mode %v, want 0600", fi.Mode().Perm())
	}
	if code, _ := renew("--name", "b.example.com"); code != 0 || strings.Join(readCert(t, filepath.Join(dir, "server.crt")).DNSNames, ",") != "b.example.com" {
		t.Errorf("ca renew --name b.example.com = %d, names %v", code, readCert(t, filepath.Join(dir, "server.crt")).DNSNames)
	}
	var o, e bytes.Buffer
	if code := runContext(t.Context(), []string{"ca", "renew", "--dir", t.TempDir()}, &o, &e, nil); code != 1 || !strings.Contains(e.String(), "ca.crt") {
		t.Errorf("ca renew without a CA = %d: %s", code, e.String())
	}
}

func writeYAML(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildAgent builds the agent command into dir.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent-bin")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "../agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build agent: %v\n%s", err, out)
	}
	return bin
}

// TestHelpListsSubcommands: `server --help` names every subcommand, each
// on a line of its own that says what it does.
func TestHelpListsSubcommands(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := runContext(t.Context(), []string{"--help"}, &out, &errb, nil); code != 0 {
		t.Fatalf("server --help = %d", code)
	}
	help := out.String() + errb.String()
	for _, sub := range []string{"token", "agent", "inventory", "ca"} {
		n := 0
		for _, l := range strings.Split(help, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "server" && f[1] == sub {
				n++
			}
		}
		if n != 1 {
			t.Errorf("server --help has %d lines for the subcommand %q, want 1:\n%s", n, sub, help)
		}
	}
}
