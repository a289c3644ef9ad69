// Package atomicfile writes files atomically: a temporary file beside the
// target, synced, then renamed over it, so a reader sees the old content
// or the new, never a part. The server (its CA and dev mode), the agent
// (its policy cache) and enrollment (certificates and keys) write through
// it.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path atomically with the given mode (the directory
// is created 0700 when missing).
func Write(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return write(path, data, mode, os.Rename)
}

// ErrExists is wrapped by WriteNew when path already exists.
var ErrExists = errors.New("already exists")

// WriteNew is Write that refuses to replace anything: path must not exist
// (checked again at the final step with a hard link, which fails when
// another writer created path meanwhile). The directory must exist.
func WriteNew(path string, data []byte, mode os.FileMode) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("write %s: %w", path, ErrExists)
	}
	return write(path, data, mode, func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%w", ErrExists)
			}
			return err
		}
		return nil
	})
}

func write(path string, data []byte, mode os.FileMode, place func(tmp, path string) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a rename; the spare name after a link
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := place(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
