//go:build linux

package dblab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// memoryV1 is where the cgroup v1 memory controller is mounted.
const memoryV1 = "/sys/fs/cgroup/memory"

// memoryCgroup is a memory cgroup (v1) that a database runs in.
type memoryCgroup struct{ dir string }

// newMemoryCgroup creates the cgroup name with a limit of bytes.
func newMemoryCgroup(name string, bytes int64) (*memoryCgroup, error) {
	if _, err := os.Stat(filepath.Join(memoryV1, "memory.limit_in_bytes")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 memory controller at %s: %w", memoryV1, err)
	}
	dir := filepath.Join(memoryV1, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(bytes, 10)), 0o644); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("memory cgroup %s: %w", dir, err)
	}
	return &memoryCgroup{dir: dir}, nil
}

// enter is a command prefix that moves itself into the cgroup and execs
// its arguments there: what they start stays in it.
func (c *memoryCgroup) enter() []string {
	return []string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(c.dir, "cgroup.procs")}
}

// remove empties and removes the cgroup (its page cache charges move to
// the parent); nil does nothing.
func (c *memoryCgroup) remove() {
	if c == nil {
		return
	}
	os.WriteFile(filepath.Join(c.dir, "memory.force_empty"), []byte("0"), 0o644)
	os.Remove(c.dir)
}
