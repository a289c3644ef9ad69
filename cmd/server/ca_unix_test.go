//go:build unix

package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCAInitOwner: --owner gives the files to that user (a server running
// unprivileged must read its keys), modes unchanged.
func TestCAInitOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	if code, out, errOut := caInit(t, "--dir", dir, "--name", "localhost", "--owner", "nobody"); code != 0 || !strings.Contains(out, "owned by nobody") {
		t.Fatalf("ca init --owner nobody = %d: %s%s", code, out, errOut)
	}
	for _, name := range []string{"ca.crt", "ca.key", "server.crt", "server.key"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid); uid != u.Uid {
			t.Errorf("%s: owner uid %s, want nobody's %s", name, uid, u.Uid)
		}
	}
	if code, _, errOut := caInit(t, "--dir", t.TempDir(), "--name", "localhost", "--owner", "no-such-user-here"); code != 2 || !strings.Contains(errOut, "--owner") {
		t.Errorf("ca init --owner no-such-user-here = %d: %s", code, errOut)
	}
}
