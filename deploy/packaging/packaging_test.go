//go:build linux

// The packages test builds the packages with `make packages` and installs
// the agent's and the server's .deb on this machine with dpkg: files,
// owners, modes, the system user, the units (systemd-analyze verify), the
// installed agent's version command, the safe default configs (each passes
// its binary's check once the certificates exist), Debian's copyright,
// changelog and man pages, an upgrade that keeps the edited config and the
// state, removal, and a purge after which nothing the packages made is left
// but the system user (Debian policy) and the operator's own files.
// Lintian, when installed, finds nothing that matters in the .debs. The .rpm files are read with rpm, the Windows zip
// with archive/zip. Root, dpkg and rpm; skips without them, except under
// CI=true.
package packaging

import (
	"archive/zip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// require finds a program, or skips (fails under CI=true).
func require(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		skipOrFail(t, fmt.Sprintf("%s not found", name))
	}
}

func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: failing instead of skipping")
	}
	t.Skip(msg)
}

// left are the paths the packages or their scripts create: before the test
// none may exist (a purge would delete them), after the purge none does.
var left = []string{
	"/usr/bin/plumbline-agent", "/usr/bin/plumbline-server",
	"/usr/lib/systemd/system/plumbline-agent.service", "/usr/lib/systemd/system/plumbline-server.service",
	"/usr/share/doc/plumbline-agent", "/usr/share/doc/plumbline-server",
	"/etc/plumbline", "/var/lib/plumbline", "/var/lib/plumbline-agent",
}

func TestDebInstallUpgradePurge(t *testing.T) {
	if os.Getuid() != 0 {
		skipOrFail(t, "not root: dpkg -i needs root")
	}
	for _, tool := range []string{"dpkg", "dpkg-query", "rpm", "make", "systemd-analyze"} {
		require(t, tool)
	}
	for _, p := range left {
		if _, err := os.Lstat(p); err == nil {
			skipOrFail(t, fmt.Sprintf("%s exists before the test: a purge would delete it; remove the Plumbline packages (dpkg --purge plumbline-agent plumbline-server) first", p))
		}
	}
	t.Cleanup(func() {
		dpkg(t, "--purge", "plumbline-agent", "plumbline-server")
		os.RemoveAll("/etc/plumbline") // none was there before the test
	})

	dist1, dist2 := t.TempDir(), t.TempDir()
	makePackages(t, dist1, "0.9.0~test1")
	makePackages(t, dist2, "0.9.0~test2")
	deb := func(dist, pkg, version string) string {
		return filepath.Join(dist, fmt.Sprintf("%s_%s-1_amd64.deb", pkg, version))
	}
	checkRPM(t, dist2, "0.9.0~test2")
	checkZip(t, dist2, "0.9.0~test2")
	checkLintian(t, deb(dist2, "plumbline-agent", "0.9.0~test2"), deb(dist2, "plumbline-server", "0.9.0~test2"))

	// Install the agent.
	mustDpkg(t, "-i", deb(dist1, "plumbline-agent", "0.9.0~test1"))
	checkVersion(t, "/usr/bin/plumbline-agent", "version", "plumbline agent 0.9.0~test1")
	checkUser(t)
	checkModes(t, []mode{
		{"/usr/bin/plumbline-agent", 0o755, "root", "root", false},
		{"/usr/lib/systemd/system/plumbline-agent.service", 0o644, "root", "root", false},
		{"/etc/plumbline", 0o750, "root", "plumbline", true},
		{"/etc/plumbline/agent.yaml", 0o640, "root", "plumbline", false},
		{"/etc/plumbline/tls", 0o750, "root", "plumbline", true},
		{"/var/lib/plumbline-agent", 0o700, "plumbline", "plumbline", true},
	})
	checkUnit(t, "agent")
	checkDocs(t, "plumbline-agent", "0.9.0~test1")
	if b, err := os.ReadFile("/etc/plumbline/agent.yaml"); err != nil {
		t.Error(err)
	} else {
		checkSafeAgentConfig(t, "/etc/plumbline/agent.yaml", b)
	}

	// Upgrade: an edited config and the state stay.
	appendFile(t, "/etc/plumbline/agent.yaml", "# edited by the operator\n")
	if err := os.WriteFile("/var/lib/plumbline-agent/state", []byte("spooled"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustDpkg(t, "-i", deb(dist2, "plumbline-agent", "0.9.0~test2"))
	checkVersion(t, "/usr/bin/plumbline-agent", "version", "plumbline agent 0.9.0~test2")
	if b, _ := os.ReadFile("/etc/plumbline/agent.yaml"); !strings.Contains(string(b), "# edited by the operator") {
		t.Error("upgrade replaced the edited /etc/plumbline/agent.yaml")
	}
	mustExist(t, "/var/lib/plumbline-agent/state")

	// The server beside it shares the user and /etc/plumbline.
	mustDpkg(t, "-i", deb(dist2, "plumbline-server", "0.9.0~test2"))
	checkVersion(t, "/usr/bin/plumbline-server", "--version", "plumbline server 0.9.0~test2")
	checkModes(t, []mode{
		{"/usr/bin/plumbline-server", 0o755, "root", "root", false},
		{"/etc/plumbline/server.yaml", 0o640, "root", "plumbline", false},
		{"/etc/plumbline/pki", 0o750, "root", "plumbline", true},
		{"/var/lib/plumbline", 0o750, "plumbline", "plumbline", true},
	})
	checkUnit(t, "server")
	checkDocs(t, "plumbline-server", "0.9.0~test2")
	if b, err := os.ReadFile("/etc/plumbline/server.yaml"); err != nil {
		t.Error(err)
	} else {
		checkSafeServerConfig(t, "/etc/plumbline/server.yaml", b)
	}
	// With what `server ca init` and `agent enroll` write, the unedited
	// configs pass the installed binaries' checks.
	writePKI(t, "/etc/plumbline/pki", "/var/lib/plumbline-agent/tls")
	checkConfigs(t, "/usr/bin/plumbline-agent", "/etc/plumbline/agent.yaml", "/usr/bin/plumbline-server", "/etc/plumbline/server.yaml")

	// Remove: binary and unit go; config, state and the user stay.
	mustDpkg(t, "-r", "plumbline-agent")
	mustNotExist(t, "/usr/bin/plumbline-agent", "/usr/lib/systemd/system/plumbline-agent.service")
	mustExist(t, "/etc/plumbline/agent.yaml", "/var/lib/plumbline-agent/state")

	// Purge the agent: its config and state go; the user stays.
	mustDpkg(t, "--purge", "plumbline-agent")
	mustNotExist(t, "/etc/plumbline/agent.yaml", "/var/lib/plumbline-agent")
	mustExist(t, "/etc/plumbline/server.yaml", "/var/lib/plumbline")
	if _, err := user.Lookup("plumbline"); err != nil {
		t.Errorf("purging the agent removed the user the server still runs as: %v", err)
	}

	// Purge the server, the last package: what the operator made (the
	// certificates) stays, and so do the user and group (Debian policy);
	// with those files gone, nothing else is left.
	out, err := dpkg(t, "--force-confold", "--purge", "plumbline-server")
	if err != nil {
		t.Fatalf("dpkg --purge plumbline-server: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "warning") && !strings.Contains(l, "directory '/etc/plumbline' not empty") {
			t.Errorf("dpkg --purge plumbline-server warned: %s", l)
		}
	}
	mustExist(t, "/etc/plumbline/pki/ca.key")
	if err := os.RemoveAll("/etc/plumbline"); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, left...)
	if _, err := user.Lookup("plumbline"); err != nil {
		t.Errorf("the last purge removed user plumbline: %v (Debian policy keeps system users)", err)
	}
	if _, err := user.LookupGroup("plumbline"); err != nil {
		t.Errorf("the last purge removed group plumbline: %v", err)
	}
	for _, pkg := range []string{"plumbline-agent", "plumbline-server"} {
		out, _ := exec.Command("dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg).Output()
		if s := strings.TrimSpace(string(out)); s != "" && s != "un" {
			t.Errorf("dpkg still knows %s: status %q", pkg, s)
		}
	}
}

// makePackages runs `make packages` for amd64 into dist.
func makePackages(t *testing.T, dist, version string) {
	t.Helper()
	cmd := exec.Command("make", "-C", "../..", "packages", "DIST="+dist, "VERSION="+version, "ARCHS=amd64")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make packages: %v\n%s", err, out)
	}
}

// dpkg runs dpkg, waiting while another dpkg or apt holds the lock.
func dpkg(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cmd := exec.Command("dpkg", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(2 * time.Second)
	}
}

func mustDpkg(t *testing.T, args ...string) {
	t.Helper()
	// --force-confold: an edited conffile is kept without asking.
	out, err := dpkg(t, append([]string{"--force-confold"}, args...)...)
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if strings.Contains(string(out), "warning") {
		t.Errorf("dpkg %s warned:\n%s", strings.Join(args, " "), out)
	}
}

func checkVersion(t *testing.T, bin, arg, want string) {
	t.Helper()
	out, err := exec.Command(bin, arg).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("%s %s = %q (%v), want %q", bin, arg, out, err, want)
	}
}

// checkUser: plumbline is a system user with no login and no home.
func checkUser(t *testing.T) {
	t.Helper()
	out, err := exec.Command("getent", "passwd", "plumbline").Output()
	if err != nil {
		t.Fatalf("getent passwd plumbline: %v", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(f) != 7 {
		t.Fatalf("passwd entry %q", out)
	}
	uid, _ := strconv.Atoi(f[2])
	if uid == 0 || uid >= 1000 {
		t.Errorf("uid %d: want a system uid (1-999)", uid)
	}
	if f[5] != "/nonexistent" || f[6] != "/usr/sbin/nologin" {
		t.Errorf("home %q shell %q: want /nonexistent and /usr/sbin/nologin", f[5], f[6])
	}
	if _, err := os.Stat(f[5]); err == nil {
		t.Errorf("the user's home %s exists", f[5])
	}
}

type mode struct {
	path         string
	perm         os.FileMode
	owner, group string
	dir          bool
}

func checkModes(t *testing.T, want []mode) {
	t.Helper()
	for _, w := range want {
		fi, err := os.Lstat(w.path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		owner, _ := user.LookupId(strconv.Itoa(int(st.Uid)))
		group, _ := user.LookupGroupId(strconv.Itoa(int(st.Gid)))
		var got mode
		got.path, got.perm, got.dir = w.path, fi.Mode().Perm(), fi.IsDir()
		if owner != nil {
			got.owner = owner.Username
		}
		if group != nil {
			got.group = group.Name
		}
		if got != w {
			t.Errorf("%s: %v %s:%s (dir %v), want %v %s:%s (dir %v)", w.path, got.perm, got.owner, got.group, got.dir, w.perm, w.owner, w.group, w.dir)
		}
	}
}

// checkUnit: the installed unit is deploy/systemd's with the packaged
// binary path, and systemd-analyze verify accepts it as installed (its
// ExecStart binary exists). No running systemd is needed.
func checkUnit(t *testing.T, prog string) {
	t.Helper()
	name := "plumbline-" + prog + ".service"
	src, err := os.ReadFile(filepath.Join("..", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join("/usr/lib/systemd/system", name)
	got, err := os.ReadFile(installed)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(string(src), "/usr/local/bin/plumbline-", "/usr/bin/plumbline-")
	if string(got) != want {
		t.Errorf("%s differs from deploy/systemd/%s with /usr/bin", installed, name)
	}
	if !strings.Contains(string(got), "ExecStart=/usr/bin/plumbline-"+prog) {
		t.Errorf("%s: no ExecStart=/usr/bin/plumbline-%s", installed, prog)
	}
	out, err := exec.Command("systemd-analyze", "verify", installed).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", installed, err, out)
	}
}

// checkRPM reads both .rpm files: name, version, files with their modes and
// owners, and the scriptlets that make the user.
func checkRPM(t *testing.T, dist, version string) {
	t.Helper()
	for _, prog := range []string{"agent", "server"} {
		pkg := filepath.Join(dist, fmt.Sprintf("plumbline-%s-%s-1.x86_64.rpm", prog, version))
		info := rpmQuery(t, pkg, "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}\n")
		if want := fmt.Sprintf("plumbline-%s %s 1 x86_64", prog, version); strings.TrimSpace(info) != want {
			t.Errorf("%s: %q, want %q", filepath.Base(pkg), info, want)
		}
		files := rpmQuery(t, pkg, "--queryformat", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILENAMES}\n]")
		for _, want := range []string{
			"-rwxr-xr-x root root /usr/bin/plumbline-" + prog,
			"-rw-r--r-- root root /usr/lib/systemd/system/plumbline-" + prog + ".service",
			"drwxr-x--- root plumbline /etc/plumbline",
			"-rw-r----- root plumbline /etc/plumbline/" + prog + ".yaml",
		} {
			if !strings.Contains(files, want+"\n") {
				t.Errorf("%s: no %q in\n%s", filepath.Base(pkg), want, files)
			}
		}
		if cfg := rpmQuery(t, pkg, "--configfiles"); strings.TrimSpace(cfg) != "/etc/plumbline/"+prog+".yaml" {
			t.Errorf("%s: config files %q", filepath.Base(pkg), cfg)
		}
		scripts := rpmQuery(t, pkg, "--scripts")
		for _, want := range []string{"useradd --system", "install -d -m", "systemctl --no-reload disable", "disable plumbline-" + prog + ".service"} {
			if !strings.Contains(scripts, want) {
				t.Errorf("%s: scriptlets lack %q", filepath.Base(pkg), want)
			}
		}
	}
}

func rpmQuery(t *testing.T, pkg string, args ...string) string {
	t.Helper()
	out, err := exec.Command("rpm", append([]string{"-qp", pkg}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("rpm -qp %s %v: %v\n%s", pkg, args, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return string(out)
}

// checkZip: the Windows zip holds agent.exe (a PE image), its config
// example, the service install README and the licence.
func checkZip(t *testing.T, dist, version string) {
	t.Helper()
	top := fmt.Sprintf("plumbline-agent_%s_windows_amd64", version)
	zr, err := zip.OpenReader(filepath.Join(dist, top+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Name == top+"/agent.exe" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			head := make([]byte, 2)
			_, err = rc.Read(head)
			rc.Close()
			if err != nil || string(head) != "MZ" {
				t.Errorf("agent.exe starts %q (%v), want MZ", head, err)
			}
		}
	}
	want := []string{top + "/agent.exe", top + "/agent.yaml", top + "/README.md", top + "/LICENSE"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("zip holds %v, want %v", names, want)
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func mustNotExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left", p)
		}
	}
}
