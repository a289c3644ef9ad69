package geometry

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A tree file describes a sysfs/procfs/dev/LVM tree in a few lines, so that
// fixtures stay small, reviewable and checkout-safe on every OS (sysfs names
// hold ':'). Paths are relative to the tree root (sys/..., proc/..., dev/...,
// lvm/..., etc/...). Directives:
//
//	mount <mountinfo line>            appended to proc/self/mountinfo (none: no such file)
//	file <path> [value]               a one-line file ("value\n")
//	link <path> <target>              a symlink
//	dir <path>                        a directory
//	data <path> <len> <base64>        binary, zero-padded to len bytes
//	dev <MAJ:MIN> <devices/... path>  sys/dev/block link plus the dev file
//	queue <devices/... path> <logical> <physical> <min_io> <opt_io> <rotational>
//	text <path> ... end               the lines between, verbatim
func buildTree(t testing.TB, spec []byte, root string) {
	t.Helper()
	var mountinfo bytes.Buffer
	write := func(rel string, data []byte) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(rel, target string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(spec))
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(l, " ")
		f := strings.Fields(rest)
		bad := func() { t.Fatalf("tree line %d: bad %s directive: %q", line, verb, l) }
		switch verb {
		case "mount":
			mountinfo.WriteString(rest + "\n")
		case "file":
			if len(f) < 1 {
				bad()
			}
			val := strings.TrimSpace(strings.TrimPrefix(rest, f[0]))
			write(f[0], []byte(val+"\n"))
		case "link":
			if len(f) != 2 {
				bad()
			}
			symlink(f[0], f[1])
		case "dir":
			if len(f) != 1 {
				bad()
			}
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(f[0])), 0o755); err != nil {
				t.Fatal(err)
			}
		case "data":
			if len(f) != 3 {
				bad()
			}
			n, err := strconv.Atoi(f[1])
			b, err2 := base64.StdEncoding.DecodeString(f[2])
			if err != nil || err2 != nil || len(b) > n {
				bad()
			}
			write(f[0], append(b, make([]byte, n-len(b))...))
		case "dev":
			if len(f) != 2 {
				bad()
			}
			symlink("sys/dev/block/"+f[0], "../../"+f[1])
			write("sys/"+f[1]+"/dev", []byte(f[0]+"\n"))
		case "queue":
			if len(f) != 6 {
				bad()
			}
			q := "sys/" + f[0] + "/queue/"
			for i, name := range []string{"logical_block_size", "physical_block_size", "minimum_io_size", "optimal_io_size", "rotational"} {
				write(q+name, []byte(f[i+1]+"\n"))
			}
		case "text":
			if len(f) != 1 {
				bad()
			}
			var body bytes.Buffer
			for sc.Scan() {
				line++
				if strings.TrimSpace(sc.Text()) == "end" {
					break
				}
				body.WriteString(sc.Text() + "\n")
			}
			write(f[0], body.Bytes())
		default:
			bad()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if mountinfo.Len() > 0 { // trees of kernels before 2.6.26 have /proc/mounts only
		write("proc/self/mountinfo", mountinfo.Bytes())
	}
	if err := os.MkdirAll(filepath.Join(root, "sys", "dev", "block"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// treeOptions points discovery at a built tree, as for a captured host.
func treeOptions(root string) Options {
	return Options{
		SysfsRoot:       filepath.Join(root, "sys"),
		ProcfsRoot:      filepath.Join(root, "proc"),
		DevRoot:         filepath.Join(root, "dev"),
		LVMBackupDir:    filepath.Join(root, "lvm"),
		ReadSuperblocks: true,
	}
}

// loadTree builds testdata/trees/<name>.tree into a temp dir.
func loadTree(t testing.TB, name string) string {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join("testdata", "trees", name+".tree"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	buildTree(t, spec, root)
	return root
}
