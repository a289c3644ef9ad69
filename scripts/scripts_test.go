//go:build linux

// Package scripts holds no code: its tests run the shell scripts of the
// Makefile (apt-install.sh, run.sh) as a user would.
package scripts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// require finds a program, or skips (fails under CI=true).
func require(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found", name)
	}
	t.Skipf("%s not found", name)
	return ""
}

// aptSandbox is an apt configuration whose state, lists, cache and dpkg
// database live under dir, with no sources: apt-get update and install
// run there without touching (or waiting for) the host's apt.
func aptSandbox(t *testing.T) (env []string, listsLock, frontendLock string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d", "dpkg/updates", "dpkg/info", "log", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"dpkg/status", "etc/sources.list"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`Dir::State "%[1]s/state";
Dir::State::Lists "%[1]s/lists";
Dir::State::status "%[1]s/dpkg/status";
Dir::Cache "%[1]s/cache";
Dir::Etc::sourcelist "%[1]s/etc/sources.list";
Dir::Etc::sourceparts "%[1]s/etc/sources.list.d";
Dir::Etc::preferencesparts "%[1]s/etc/preferences.d";
Dir::Log "%[1]s/log";
DPkg::Options { "--admindir=%[1]s/dpkg"; };
`, dir)
	p := filepath.Join(dir, "apt.conf")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "APT_CONFIG="+p), filepath.Join(dir, "lists", "lock"), filepath.Join(dir, "dpkg", "lock-frontend")
}

// holdLock takes apt's kind of lock (fcntl, exclusive) on path and
// returns its release.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			f.Close() // closing drops the fcntl lock
		}
	}
	t.Cleanup(release)
	return release
}

// TestAptInstallWaitsForLocks: with apt's lists lock and dpkg frontend
// lock held (a fresh VM's boot-time apt run), apt-install.sh waits and
// then succeeds; with a short APT_LOCK_TIMEOUT it fails and says why.
func TestAptInstallWaitsForLocks(t *testing.T) {
	require(t, "apt-get")
	if os.Getuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (apt-get install)")
		}
		t.Skip("needs root (apt-get install)")
	}
	t.Run("waits", func(t *testing.T) {
		env, lists, frontend := aptSandbox(t)
		releaseLists, releaseFrontend := holdLock(t, lists), holdLock(t, frontend)
		cmd := exec.Command("./apt-install.sh")
		cmd.Env = append(env, "APT_LOCK_TIMEOUT=60")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Each lock is released only after the script has been seen
		// still waiting for it.
		for _, release := range []func(){releaseLists, releaseFrontend} {
			select {
			case err := <-done:
				t.Fatalf("apt-install.sh exited (%v) while apt was locked:\n%s", err, out.String())
			case <-time.After(3 * time.Second):
			}
			release()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("apt-install.sh after the locks were released: %v\n%s", err, out.String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("apt-install.sh still running 60s after the locks were released:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "waiting up to 60s for apt") {
			t.Errorf("apt-install.sh did not say it waits for the lock:\n%s", out.String())
		}
	})
	t.Run("times out", func(t *testing.T) {
		env, lists, _ := aptSandbox(t)
		holdLock(t, lists)
		cmd := exec.Command("./apt-install.sh")
		cmd.Env = append(env, "APT_LOCK_TIMEOUT=1")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("apt-install.sh succeeded with the lists lock held:\n%s", out)
		}
		if !strings.Contains(string(out), "lists lock still held after 1s") {
			t.Errorf("apt-install.sh failed without naming the held lock:\n%s", out)
		}
	})
}

// buildBinaries builds the server and the agent into a temporary bin
// directory for run.sh (PLUMBLINE_BIN).
func buildBinaries(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin+"/", "../cmd/server", "../cmd/agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runEnv is the environment of a run.sh with its own data directory and
// the given listen addresses. The dev agent is kept to the root file
// system and off superblock reads (agent.local.yaml, which run.sh's server
// never rewrites), so that other tests' devices on this machine cannot
// slow it.
func runEnv(t *testing.T, bin, dir, grpcAddr, webAddr string) []string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	local := "read_superblocks: false\ninclude: {mount_points: [/]}\nprobes: []\n"
	if err := os.WriteFile(filepath.Join(dir, "dev", "agent.local.yaml"), []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PLUMBLINE_BIN="+bin, "PLUMBLINE_DEV_DIR="+dir,
		"PLUMBLINE_GRPC_ADDRESS="+grpcAddr, "PLUMBLINE_WEB_ADDRESS="+webAddr)
}

// TestRunSh: `make run` says "running" only when the server and the agent
// answer /healthz (also on a restart, when a previous agent.yaml is
// there), stops both on SIGINT with status 0 (round 0: kill -INT to
// run.sh; round 1: Ctrl-C, to its process group), and fails clearly,
// non-zero, when a port is taken.
func TestRunSh(t *testing.T) {
	bin := buildBinaries(t)
	dir := t.TempDir()
	for round := range 2 { // the second start finds the first's agent.yaml
		cmd := exec.Command("./run.sh")
		cmd.Env = runEnv(t, bin, dir, "127.0.0.1:0", "127.0.0.1:0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own process group, as a terminal's foreground job
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sc := bufio.NewScanner(stdout)
		var inventory, agent string
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "agent:" {
				agent = f[1]
			}
			if f := strings.Fields(line); len(f) >= 4 && f[0] == "inventory:" {
				inventory = f[3]
			}
			if strings.HasPrefix(line, "  Ctrl-C stops both.") {
				break
			}
		}
		if !strings.Contains(out.String(), "server and agent are running") || inventory == "" || agent == "" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: run.sh did not say running:\n%s\n%s", round, out.String(), stderr.String())
		}
		// Said running: both answer now, not later.
		for _, u := range []string{strings.TrimSuffix(inventory, "/api/v1/volumes") + "/healthz", strings.TrimSuffix(agent, "/metrics") + "/healthz"} {
			resp, err := http.Get(u)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("round %d: run.sh said running, but GET %s: %v %v", round, u, resp, err)
			} else {
				resp.Body.Close()
			}
		}
		interruptRunSh(t, cmd, stdout, round == 1, &out, &stderr)
	}

	// A port in use: a clear message and a non-zero exit.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command("./run.sh")
	cmd.Env = runEnv(t, bin, t.TempDir(), "127.0.0.1:0", l.Addr().String())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("run.sh with %s taken: %v, want a non-zero exit\n%s", l.Addr(), err, out)
	}
	if !strings.Contains(string(out), "address already in use") || !strings.Contains(string(out), "PLUMBLINE_WEB_ADDRESS") || strings.Contains(string(out), "are running") {
		t.Errorf("run.sh with %s taken does not say why and what to do:\n%s", l.Addr(), out)
	}
}

// TestMakeRunSaysItBuilds: `make run` says it is building, and how long
// the first build takes, before the build, and the build lists the
// packages it compiles (a cold build is about 2 minutes of otherwise
// silence).
func TestMakeRunSaysItBuilds(t *testing.T) {
	mk := require(t, "make")
	out, err := exec.Command(mk, "-C", "..", "-n", "run").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	say, build := -1, -1
	for i, l := range lines {
		if strings.Contains(l, "building plumbline (first build takes about 2 minutes)") {
			say = i
		}
		if strings.Contains(l, " build -v ") {
			build = i
		}
	}
	if say < 0 || build < 0 || say > build {
		t.Errorf("make run does not say it is building before a go build -v:\n%s", out)
	}
}

// interruptRunSh sends SIGINT to a running run.sh, to it alone or, like
// Ctrl-C in a terminal, to its whole process group (run.sh, the server and
// the agent), and checks that it stops with exit status 0 (so make prints
// no "*** Error") and says so.
func interruptRunSh(t *testing.T, cmd *exec.Cmd, stdout io.Reader, group bool, out *strings.Builder, stderr *bytes.Buffer) {
	t.Helper()
	rest := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stdout); rest <- b }()
	if group {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	} else {
		cmd.Process.Signal(os.Interrupt)
	}
	done := make(chan error, 1)
	go func() { out.Write(<-rest); done <- cmd.Wait() }() // the pipe read to its end before Wait
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String()+out.String(), "plumbline: stopped") {
			t.Errorf("run.sh after SIGINT (to the group: %v): %v, want exit status 0 and \"plumbline: stopped\"\n%s", group, err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("run.sh did not stop within 60s of SIGINT (to the group: %v):\n%s", group, stderr.String())
	}
}
