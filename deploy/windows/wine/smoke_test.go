// Package wine holds the Windows smoke test: the real agent.exe, built for
// Windows, run under Wine against a real Linux dev server over mutual TLS.
// It needs Debian's wine (wine64) and gcc-mingw-w64-x86-64 (scripts/test.sh
// installs both); without them it skips, except under CI=true, where it
// fails.
//
// Wine 8 ships no bcryptprimitives.dll, whose ProcessPrng Go's runtime
// calls at start; testdata/bcryptprimitives.c is a stand-in the test builds
// with mingw-w64 and puts into the private prefix's system32.
package wine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// require finds a program, or skips (fails under CI=true).
func require(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found (Debian: apt-get install %s)", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// winPath is path as Wine's Z: drive (the Linux root) names it.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

type wineEnv struct {
	wine string
	env  []string
	exe  string
}

// run runs agent.exe with args under Wine and returns its stdout; it fails
// the test on a non-zero exit.
func (w wineEnv) run(t *testing.T, ctx context.Context, args ...string) (string, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, w.wine, append([]string{w.exe}, args...)...)
	cmd.Env = w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wine agent.exe %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func goBuild(t *testing.T, goos, out, pkg string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=%s go build %s: %v\n%s", goos, pkg, err, b)
	}
}

func TestAgentUnderWine(t *testing.T) {
	wine := require(t, "wine", "wine")
	gcc := require(t, "x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")
	dir := t.TempDir()

	// Builds: agent.exe, the Linux server, the stand-in DLL.
	exe := filepath.Join(dir, "agent.exe")
	server := filepath.Join(dir, "server")
	goBuild(t, "windows", exe, "github.com/plumbline/plumbline/cmd/agent")
	goBuild(t, "linux", server, "github.com/plumbline/plumbline/cmd/server")
	dll := filepath.Join(dir, "bcryptprimitives.dll")
	if b, err := exec.Command(gcc, "-shared", "-O2", "-Wall", "-Werror", "-o", dll, filepath.Join("testdata", "bcryptprimitives.c")).CombinedOutput(); err != nil {
		t.Fatalf("build bcryptprimitives.dll: %v\n%s", err, b)
	}

	// The clock starts after the builds (minutes of their own on a loaded
	// machine): a first wineboot on a fresh machine takes a minute or two.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// A private prefix, initialised, with the DLL in its system32.
	prefix := filepath.Join(dir, "prefix")
	env := append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=bcryptprimitives=n;mscoree,mshtml=")
	t.Cleanup(func() {
		// Stop this prefix's wineserver (and so its processes), nobody else's.
		k := exec.Command("wineserver", "-k")
		k.Env = env
		k.Run()
	})
	start := time.Now()
	boot := exec.CommandContext(ctx, wine, "wineboot", "--init")
	boot.Env = env
	if b, err := boot.CombinedOutput(); err != nil {
		t.Fatalf("wineboot --init: %v\n%s", err, b)
	}
	t.Logf("wine prefix ready in %s", time.Since(start).Round(time.Millisecond))
	sys32 := filepath.Join(prefix, "drive_c", "windows", "system32")
	b, err := os.ReadFile(dll)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys32, "bcryptprimitives.dll"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	w := wineEnv{wine: wine, env: env, exe: exe}

	t.Run("version", func(t *testing.T) {
		out, _ := w.run(t, ctx, "version")
		if !strings.HasPrefix(out, "plumbline agent ") {
			t.Errorf("agent.exe version = %q, want plumbline agent <version>", out)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		out, _ := w.run(t, ctx, "inspect", "--format", "json")
		checkInspect(t, []byte(out))
	})

	probeDir := filepath.Join(dir, "probe")
	if err := os.Mkdir(probeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("probe", func(t *testing.T) {
		const ops = 40
		out, _ := w.run(t, ctx, "probe", "--dir", winPath(probeDir), "--kind", "random-write", "--file-size", "4MiB",
			"--ops", fmt.Sprint(ops), "--iops", "0", "--format", "json")
		var res struct {
			Ops, Errors int
			FileSize    int64  `json:"file_size_bytes"`
			Stopped     string `json:"stopped_reason"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("probe output: %v\n%s", err, out)
		}
		if res.Ops != ops || res.Errors != 0 || res.FileSize != 4<<20 || res.Stopped != "" {
			t.Errorf("probe: ops %d errors %d file %d stopped %q; want %d ops, 0 errors, 4MiB, not stopped\n%s",
				res.Ops, res.Errors, res.FileSize, res.Stopped, ops, out)
		}
	})

	t.Run("service", func(t *testing.T) {
		cfg := filepath.Join(dir, "service.yaml")
		if err := os.WriteFile(cfg, []byte("server: {address: 127.0.0.1:1, insecure: true}\nspool: {dir: 'C:\\spool'}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr := w.run(t, ctx, "service", "install", "--config", winPath(cfg), "--name", "plumbline-smoke")
		if !strings.Contains(out, "service plumbline-smoke installed") {
			t.Errorf("service install said %q", out)
		}
		// Wine has no delayed auto-start: the install says so instead of failing.
		t.Logf("service install stderr: %s", stderr)
		out, _ = w.run(t, ctx, "service", "uninstall", "--name", "plumbline-smoke")
		if !strings.Contains(out, "service plumbline-smoke removed") {
			t.Errorf("service uninstall said %q", out)
		}
	})

	t.Run("run", func(t *testing.T) { runAgainstServer(t, ctx, w, server, dir, probeDir) })
}

// checkInspect: a Windows host, the C: volume, and every value that is
// missing explained by an unknown entry with a reason.
func checkInspect(t *testing.T, b []byte) {
	t.Helper()
	var inv struct {
		Host struct {
			OS       string `json:"os"`
			Hostname string `json:"hostname"`
		} `json:"host"`
		Volumes []map[string]any `json:"volumes"`
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatalf("inspect output: %v\n%s", err, b)
	}
	if inv.Host.OS != "windows" || inv.Host.Hostname == "" {
		t.Errorf("host = %+v, want os windows and a hostname", inv.Host)
	}
	var mounts []string
	for _, v := range inv.Volumes {
		mp, _ := v["mount_point"].(string)
		mounts = append(mounts, mp)
		fs, _ := v["filesystem"].(map[string]any)
		if fs["type"] == nil || fs["type"] == "" {
			t.Errorf("volume %s: no file-system type", mp)
		}
		layers, _ := v["layers"].([]any)
		if len(layers) == 0 {
			t.Errorf("volume %s: no layers", mp)
		}
		for i, l := range layers {
			checkUnknowns(t, fmt.Sprintf("%s layer %d", mp, i), l.(map[string]any),
				[]string{"offset_bytes", "size_bytes", "block_size_bytes"})
		}
		checkUnknowns(t, mp+" filesystem", fs, []string{"block_size_bytes", "size_bytes"})
		a, _ := v["alignment"].(map[string]any)
		switch a["verdict"] {
		case "aligned", "misaligned":
		case "unknown":
			// An unknown verdict names its cause.
			if fs, _ := a["findings"].([]any); len(fs) == 0 {
				t.Errorf("volume %s: verdict unknown without a finding saying why", mp)
			}
		default:
			t.Errorf("volume %s: verdict %v", mp, a["verdict"])
		}
	}
	found := false
	for _, mp := range mounts {
		found = found || strings.EqualFold(mp, `C:\`)
	}
	if !found {
		t.Errorf("inspect saw volumes %q, want C:\\ among them\n%s", mounts, b)
	}
}

// checkUnknowns: each of fields is either present or listed in unknown,
// and every unknown entry has a reason.
func checkUnknowns(t *testing.T, where string, obj map[string]any, fields []string) {
	t.Helper()
	unknown := map[string]bool{}
	list, _ := obj["unknown"].([]any)
	for _, u := range list {
		m, _ := u.(map[string]any)
		f, _ := m["field"].(string)
		r, _ := m["reason"].(string)
		if f == "" || strings.TrimSpace(r) == "" {
			t.Errorf("%s: unknown entry %v without a field or a reason", where, u)
		}
		unknown[f] = true
	}
	for _, f := range fields {
		if _, ok := obj[f]; !ok && !unknown[f] {
			t.Errorf("%s: %s is neither given nor listed as unknown with a reason", where, f)
		}
	}
}

// runAgainstServer starts a Linux dev server (its own CA, mutual TLS) and
// agent.exe's `run` with its certificates, and waits until one of the
// agent's probe results is in the server's inventory.
func runAgainstServer(t *testing.T, ctx context.Context, w wineEnv, server, dir, probeDir string) {
	data := filepath.Join(dir, "server-data")
	srv := exec.CommandContext(ctx, server, "--dev", "--data-dir", data,
		"--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0", "--baseline.interval", "1s")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvLog bytes.Buffer
	srv.Stderr = &srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })
	grpcRE := regexp.MustCompile(`agents dial (\S+)\)`)
	httpRE := regexp.MustCompile(`HTTP:\s+(http://\S+)/api/v1/volumes`)
	var grpcAddr, web string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && (grpcAddr == "" || web == "") {
		if m := grpcRE.FindStringSubmatch(sc.Text()); m != nil {
			grpcAddr = m[1]
		}
		if m := httpRE.FindStringSubmatch(sc.Text()); m != nil {
			web = m[1]
		}
	}
	go io.Copy(io.Discard, stdout)
	if grpcAddr == "" || web == "" {
		t.Fatalf("dev server printed no addresses; log:\n%s", srvLog.String())
	}

	dev := filepath.Join(data, "dev")
	cfg := fmt.Sprintf(`server:
  address: %s
  tls:
    ca_file: '%s'
    cert_file: '%s'
    key_file: '%s'
    server_name: localhost
spool:
  dir: '%s'
intervals:
  report: 500ms
probes:
  - mount_point: 'Z:/'
    dir: '%s'
    kinds: [random-read]
    every: 1h
    ops: 20
    iops: 0
    file_size: 4MiB
    busy_threshold: 0
`, grpcAddr, winPath(filepath.Join(dev, "ca.crt")), winPath(filepath.Join(dev, "agent.crt")), winPath(filepath.Join(dev, "agent.key")),
		winPath(filepath.Join(dir, "spool")), winPath(probeDir))
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	runCtx, stopAgent := context.WithCancel(ctx)
	agent := exec.CommandContext(runCtx, w.wine, w.exe, "run", "--config", winPath(cfgPath))
	agent.Env = w.env
	var agentLog bytes.Buffer
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopAgent(); agent.Wait() }()

	deadline := time.Now().Add(90 * time.Second)
	for {
		if n, err := probeRecords(ctx, web); err == nil && n > 0 {
			t.Logf("a probe record of agent.exe arrived (%d)", n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe record from agent.exe within 90s\nagent:\n%s\nserver:\n%s", agentLog.String(), srvLog.String())
		}
		time.Sleep(time.Second)
	}
}

// probeRecords counts the probe results the server holds for the volume
// at Z:\.
func probeRecords(ctx context.Context, web string) (int, error) {
	var list struct {
		Volumes []struct {
			ID         string `json:"id"`
			MountPoint string `json:"mount_point"`
		} `json:"volumes"`
	}
	if err := getJSON(ctx, web+"/api/v1/volumes", &list); err != nil {
		return 0, err
	}
	for _, v := range list.Volumes {
		if !strings.EqualFold(v.MountPoint, `Z:\`) {
			continue
		}
		var one struct {
			Probes []map[string]any `json:"probes"`
		}
		if err := getJSON(ctx, web+"/api/v1/volumes/"+v.ID, &one); err != nil {
			return 0, err
		}
		return len(one.Probes), nil
	}
	return 0, nil
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
