package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file gets the content and the mode, and Write replaces
// an existing file; no temporary file is left behind.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.key")
	for _, content := range []string{"one", "two"} {
		if err := Write(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("mode %v, want 0600", m)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only f.key", len(ents))
	}
}

// TestWriteNew refuses to replace a file, leaves it as it was, and leaves
// no temporary file.
func TestWriteNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "ca.key")
	if err := WriteNew(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteNew(p, []byte("second"), 0o600)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second WriteNew: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Errorf("content %q after the refused write, want first", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only ca.key", len(ents))
	}
}
