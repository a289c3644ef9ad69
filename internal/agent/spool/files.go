package spool

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The ack file: the floor (8 bytes little-endian) and its CRC32C (4 bytes).
const ackSize = 12

// readAck reads the ack file: fs.ErrNotExist when there is none.
func readAck(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return ParseAck(b)
}

// ParseAck parses the ack file's bytes. It never panics.
func ParseAck(b []byte) (uint64, error) {
	if len(b) != ackSize {
		return 0, fmt.Errorf("%d bytes: want %d", len(b), ackSize)
	}
	if crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, errors.New("bad checksum")
	}
	return binary.LittleEndian.Uint64(b[:8]), nil
}

func formatAck(floor uint64) []byte {
	var b [ackSize]byte
	binary.LittleEndian.PutUint64(b[:8], floor)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	return b[:]
}

// writeAck records the floor durably. An ack file of the right size is
// overwritten in place: that needs no new space, so acknowledgements
// still reach the disk when its file system is full (a torn write is
// caught by the checksum, and a damaged ack file costs resending, never
// a record). Otherwise the file is replaced atomically.
func writeAck(dir string, floor uint64) error {
	b := formatAck(floor)
	p := filepath.Join(dir, ackFile)
	if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
		fi, serr := f.Stat()
		if serr == nil && fi.Size() == ackSize {
			_, werr := f.WriteAt(b, 0)
			if werr == nil {
				werr = f.Sync()
			}
			cerr := f.Close()
			if werr == nil && cerr == nil {
				return nil
			}
		} else {
			f.Close()
		}
	}
	return writeFileAtomic(dir, ackFile, b)
}

// writeFileAtomic replaces dir/name with b atomically and durably: a
// temporary file written and fsync'd, renamed over it, the directory
// fsync'd.
func writeFileAtomic(dir, name string, b []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("spool: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("spool: fsync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// The incarnation file of spools written before segment headers: one
// line, "<id> <legacy-through> <crc32c-hex>". It names the incarnation of
// their segments (sequences up to legacy-through: the legacy incarnation
// ""). The spool reads it while such segments remain and removes it
// after.

func formatIncarnation(inc string, legacy uint64) string {
	body := fmt.Sprintf("%s %d", inc, legacy)
	return fmt.Sprintf("%s %08x\n", body, crc32.Checksum([]byte(body), castagnoli))
}

// readIncarnation reads the incarnation file; an error wrapping
// fs.ErrNotExist when there is none.
func readIncarnation(p string) (inc string, legacy uint64, err error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", 0, err
	}
	if inc, legacy, err = ParseIncarnation(b); err != nil {
		return "", 0, fmt.Errorf("spool: %s: %w", p, err)
	}
	return inc, legacy, nil
}

// ParseIncarnation parses the incarnation file's bytes: "<32 hex digits>
// <legacy-through> <crc32c of the two, 8 hex digits>\n". It never panics.
func ParseIncarnation(b []byte) (inc string, legacy uint64, err error) {
	if len(b) > 128 {
		return "", 0, fmt.Errorf("incarnation file of %d bytes: want a short line", len(b))
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || len(f[0]) != 32 {
		return "", 0, errors.New("malformed incarnation file")
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return "", 0, errors.New("malformed incarnation id")
	}
	legacy, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, errors.New("malformed legacy sequence")
	}
	if formatIncarnation(f[0], legacy) != string(b) {
		return "", 0, errors.New("bad checksum")
	}
	return f[0], legacy, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
