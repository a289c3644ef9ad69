package agent

import (
	"hash/fnv"
	"os"
	"path/filepath"
)

// procMountinfo is the Linux mount table, <procfs>/self/mountinfo.
type procMountinfo struct{ path string }

var _ mountTable = procMountinfo{}

func newMountTable(procRoot string) mountTable {
	return procMountinfo{path: filepath.Join(procRoot, "self", "mountinfo")}
}

func (m procMountinfo) fingerprint() uint64 { return fileHash(m.path) }

// fileHash is a cheap content hash of a small file; 0 when unreadable.
func fileHash(p string) uint64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
