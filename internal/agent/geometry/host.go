package geometry

import (
	"os"
	"runtime"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// DiscoverHost identifies the host the roots describe: hostname and kernel
// from <procfs>/sys/kernel (falling back to os.Hostname for the name),
// machine id from <EtcRoot>/machine-id when EtcRoot is set; on Windows the
// build and MachineGuid instead (host_windows.go). Unreadable values are
// left empty. With opts.Captured only the tree speaks: no os.Hostname
// fallback and no Windows facts, so a capture is never labelled with the
// name of the machine that reads it. agent_version and collected_at are
// the caller's.
func DiscoverHost(opts Options) *plumblinev1.Host {
	h := &plumblinev1.Host{Os: runtime.GOOS}
	r := newRoots(opts)
	if r.proc != "" {
		h.Hostname = readTrimmed(r.proc.Path("sys", "kernel", "hostname"))
		h.Kernel = readTrimmed(r.proc.Path("sys", "kernel", "osrelease"))
	}
	if r.etc != "" {
		h.MachineId = readTrimmed(r.etc.Path("machine-id"))
	}
	if opts.Captured {
		return h
	}
	if h.Hostname == "" {
		h.Hostname, _ = os.Hostname()
	}
	osHostFacts(h)
	return h
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s, err := parseSysfsString(b)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}
