package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the terminal side (what a user's
// shell would have as stderr) and the side that reads what was drawn.
func openPTY(t *testing.T) (tty, reader *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { slave.Close(); master.Close() })
	return slave, master
}

// TestProbeCLIProgressOnTerminal: on a terminal, `agent probe` draws the
// fill (bytes, rate, ETA) and then the ops (count, ETA), and clears the line
// at the end; the result table still goes to stdout.
func TestProbeCLIProgressOnTerminal(t *testing.T) {
	tty, reader := openPTY(t)
	if !stderrIsTerminal(tty) {
		t.Fatal("a pty is not detected as a terminal")
	}
	var buf bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&buf, reader) }) // until the pty is closed
	var stdout bytes.Buffer
	dir := t.TempDir()
	// A fill of ~1 s (16 MiB at 16 MiB/s) and ~1 s of ops (200 at 200/s).
	code := runProbe(t.Context(), []string{"--dir", dir, "--file-size", "17MiB", "--fill-rate", "16MiB", "--min-free", "0",
		"--min-free-percent", "0", "--busy-threshold", "0", "--ops", "200", "--iops", "200"}, &stdout, tty)
	tty.Close()
	reader.Close()
	wg.Wait()
	if code != 0 {
		t.Fatalf("exit %d, terminal %q", code, buf.String())
	}
	got := buf.String()
	for _, want := range []string{"writing the probe file (first use): ", " MiB of 16.0 MiB (", "/s, ETA ", "probing: ", " of 200 ops, ", "\r\033[K"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("the progress line is not cleared at the end: %q", got[max(0, len(got)-80):])
	}
	if !strings.Contains(stdout.String(), "200 of 200") || strings.Contains(stdout.String(), "probing") {
		t.Errorf("stdout = %q, want the result table and no progress", stdout.String())
	}
	if stderrIsTerminal(&buf) {
		t.Error("a buffer is detected as a terminal")
	}
	f, err := os.Create(dir + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if stderrIsTerminal(f) {
		t.Error("a regular file is detected as a terminal")
	}
}
