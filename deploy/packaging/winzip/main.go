// Command winzip writes the Windows agent's zip for `make packages`
// (scripts/packages.sh): the named files at the top of the archive, in
// the order given, with one fixed time (SOURCE_DATE_EPOCH) so the same
// inputs give the same bytes.
//
//	go run ./deploy/packaging/winzip OUT.zip NAME=FILE...
package main

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "winzip:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: winzip OUT.zip NAME=FILE...")
	}
	mtime, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	out, err := os.Create(args[0])
	if err != nil {
		return err
	}
	zw := zip.NewWriter(out)
	for _, arg := range args[1:] {
		name, file, ok := strings.Cut(arg, "=")
		if !ok || name == "" || file == "" {
			out.Close()
			return fmt.Errorf("%q: want NAME=FILE", arg)
		}
		if err := add(zw, name, file, mtime); err != nil {
			out.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// sourceDate is the reproducible-builds time: SOURCE_DATE_EPOCH, else
// 1980-01-01 (the earliest a zip can say).
func sourceDate(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

func add(zw *zip.Writer, name, file string, mtime time.Time) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: mtime}
	h.SetMode(fi.Mode().Perm())
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}
