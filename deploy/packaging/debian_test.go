//go:build linux

package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkDocs: Debian policy's files of an installed package: a
// machine-readable copyright (DEP-5, Apache-2.0), changelog.Debian.gz for
// this version made with gzip -9n (no name, no time: reproducible), a man
// page for the binary that man renders without a warning, the annotated
// example config, and no stray licence file.
func checkDocs(t *testing.T, pkg, version string) {
	t.Helper()
	doc := "/usr/share/doc/" + pkg
	b, err := os.ReadFile(filepath.Join(doc, "copyright"))
	if err != nil {
		t.Error(err)
	} else {
		c := string(b)
		if !strings.HasPrefix(c, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") ||
			!strings.Contains(c, "\nFiles: *\n") || !strings.Contains(c, "\nLicense: Apache-2.0\n") ||
			!strings.Contains(c, "/usr/share/common-licenses/Apache-2.0") || strings.Contains(c, "@PKG@") {
			t.Errorf("%s/copyright is not a DEP-5 file with Files: * under Apache-2.0:\n%s", doc, c)
		}
	}
	first := gunzipFirstLine(t, filepath.Join(doc, "changelog.Debian.gz"))
	if want := fmt.Sprintf("%s (%s-1) ", pkg, version); !strings.HasPrefix(first, want) {
		t.Errorf("changelog.Debian.gz starts %q, want %q...", first, want)
	}
	man := "/usr/share/man/man8/" + pkg + ".8.gz"
	if first := gunzipFirstLine(t, man); !strings.HasPrefix(first, ".TH "+strings.ToUpper(pkg)+" 8 ") {
		t.Errorf("%s starts %q, want a .TH line", man, first)
	}
	if _, err := exec.LookPath("man"); err == nil {
		cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", man)
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "MANROFFSEQ=", "MANWIDTH=80")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("man --warnings %s: %v\n%s", man, err, stderr.String())
		}
	}
	mustExist(t, filepath.Join(doc, "examples", strings.TrimPrefix(pkg, "plumbline-")+".yaml"))
	mustNotExist(t, filepath.Join(doc, "LICENSE"))
}

// gunzipFirstLine reads a gzip file's first line and checks the header
// carries no file name and no time (gzip -n).
func gunzipFirstLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return ""
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("%s: gzip header has name %q, time %v: want gzip -n", path, zr.Name, zr.ModTime)
	}
	line, err := bufio.NewReader(zr).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Errorf("%s: %v", path, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// lintianAccepted are the lintian tags the .debs may carry, each for a
// reason; every other error or warning fails the test.
var lintianAccepted = map[string]string{
	// The removal disables the unit with systemctl as well as
	// deb-systemd-helper: an operator's `systemctl enable` makes links that
	// deb-systemd-helper does not track.
	"maintainer-script-calls-systemctl": "prerm disable",
}

// checkLintian runs lintian on the .debs when it is installed (Debian:
// apt-get install lintian) and fails on any error or warning tag not in
// lintianAccepted; the package's own overrides
// (/usr/share/lintian/overrides, deploy/packaging/lintian-overrides) say
// why the rest are as they are.
func checkLintian(t *testing.T, debs ...string) {
	t.Helper()
	if _, err := exec.LookPath("lintian"); err != nil {
		skipOrFail(t, "lintian not found (Debian: apt-get install lintian)")
	}
	cmd := exec.Command("lintian", append([]string{"--no-tag-display-limit", "--fail-on", "none"}, debs...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		// "E: plumbline-agent: tag-name [detail]"
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "E:" && f[0] != "W:" {
			continue
		}
		if _, ok := lintianAccepted[f[2]]; !ok {
			t.Errorf("lintian: %s", l)
		}
	}
}
