// Package scripts holds no code: its tests run the shell scripts of the
// Makefile (apt-install.sh, run.sh) as a user would.
package scripts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
