package dbio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/vocab"
)

// sampler reads one sample of a database's cumulative counters, holding
// its connection between samples.
type sampler interface {
	sample(ctx context.Context) (Sample, error)
	close()
}

// Source samples one configured database and diffs consecutive samples.
// It is used by one goroutine.
type Source struct {
	cfg  Config
	s    sampler
	prev *Sample
}

// NewSource prepares cfg's collector; it connects at the first Step.
// now is the clock samples are stamped with (nil: time.Now).
func NewSource(cfg Config, now func() time.Time) (*Source, error) {
	if now == nil {
		now = time.Now
	}
	pw := func() (string, error) { return readPassword(cfg.PasswordFile) }
	var s sampler
	switch cfg.Engine {
	case vocab.EnginePostgreSQL:
		s = &postgres{c: cfg, password: pw, now: now}
	case vocab.EngineMySQL, vocab.EngineMariaDB:
		s = &mysql{c: cfg, password: pw, now: now}
	default:
		return nil, fmt.Errorf("database %s: no collector for engine %q", cfg.Name, cfg.Engine)
	}
	return &Source{cfg: cfg, s: s}, nil
}

// Name is the source's name.
func (s *Source) Name() string { return s.cfg.Name }

// Config is the source's configuration.
func (s *Source) Config() Config { return s.cfg }

// Step takes one sample. It returns the interval since the previous good
// sample (ok), or ok false after the first sample and after an error; an
// interval whose counters went backwards is an error wrapping
// ErrBackwards, and the sample starts the next interval. The whole step
// is bounded by the source's timeout per statement (each statement and
// the connection carry it; the step as a whole gets one timeout more than
// its statements).
func (s *Source) Step(ctx context.Context) (d Delta, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(maxStatements+1)*s.cfg.Timeout)
	defer cancel()
	cur, err := s.s.sample(ctx)
	if err != nil {
		return Delta{}, false, fmt.Errorf("database %s: %w", s.cfg.Name, err)
	}
	prev := s.prev
	s.prev = &cur
	if prev == nil {
		return Delta{}, false, nil
	}
	d, err = Diff(*prev, cur)
	if err != nil {
		return Delta{}, false, fmt.Errorf("database %s: interval dropped: %w", s.cfg.Name, err)
	}
	return d, true, nil
}

// Close closes the connection.
func (s *Source) Close() { s.s.close() }

// maxStatements is what one sample runs at most (agentkeys documents the
// budget).
const maxStatements = agentkeys.MaxDatabaseQueries

// readPassword reads the first line of file ("" for no file). A file every
// user may read is refused: the password would not be a secret.
func readPassword(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("password_file %s: readable by every user (mode %v): chmod o-r it", file, fi.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pw := string(bytes.TrimSuffix(line, []byte("\r")))
	if pw == "" {
		return "", errors.New("password_file " + file + ": empty first line")
	}
	return pw, nil
}
