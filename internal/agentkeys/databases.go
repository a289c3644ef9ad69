package agentkeys

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Defaults and limits of a database source (DatabaseSource).
//
// Budget: one sample is at most MaxDatabaseQueries statements (PostgreSQL:
// settings, tablespaces, the I/O counters, WAL; MySQL and MariaDB:
// settings, instruments, file summary), each under the source's timeout,
// in one read-only transaction on one held connection. At the default
// every 60 s that is at most 4 statements a minute per source.
const (
	DefaultDatabaseEvery   = 60 * time.Second
	DefaultDatabaseTimeout = 5 * time.Second
	MinDatabaseEvery       = 10 * time.Second
	MaxDatabaseEvery       = time.Hour
	MaxDatabaseTimeout     = 30 * time.Second
	MaxDatabaseSources     = 16
	MaxDatabaseQueries     = 4
)

// DatabaseSource is one database whose own I/O statistics the agent reads
// (read-only statistics queries under a monitoring role; never a database
// file). The password is read from PasswordFile, never from this file.
type DatabaseSource struct {
	// Name names the source in the agent's records and logs (unique).
	Name string `yaml:"name,omitempty"`
	// Engine is postgresql, mysql or mariadb.
	Engine vocab.DatabaseEngine `yaml:"engine,omitempty"`
	// Address is host:port, or an absolute path: PostgreSQL's socket
	// directory (or the socket file .s.PGSQL.<port> in it), MySQL's socket
	// file.
	Address string `yaml:"address,omitempty"`
	// Port is PostgreSQL's port when Address is a socket directory
	// (default 5432).
	Port int `yaml:"port,omitempty"`
	// Database is the database to connect to (PostgreSQL; default
	// postgres). The statistics read are the whole server's.
	Database string `yaml:"database,omitempty"`
	// User is the monitoring role (PostgreSQL: a member of pg_monitor;
	// MySQL/MariaDB: PROCESS and SELECT on performance_schema).
	User string `yaml:"user,omitempty"`
	// PasswordFile holds the password (its first line); empty: none
	// (PostgreSQL peer or trust authentication on a socket). It must not
	// be readable by every user.
	PasswordFile string `yaml:"password_file,omitempty"`
	// Root is where the database's file-system root is on this host when
	// it runs in a chroot or a container (its paths, and their symlinks,
	// are read under it); empty: the host's /.
	Root string `yaml:"root,omitempty"`
	// Every is the sampling interval (default 60s).
	Every time.Duration `yaml:"every,omitempty"`
	// Timeout bounds connecting and each statement (default 5s).
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// WithDatabaseDefaults is sources with omitted keys filled in.
func WithDatabaseDefaults(sources []DatabaseSource) []DatabaseSource {
	out := slices.Clone(sources)
	for i := range out {
		s := &out[i]
		setZero(&s.Every, DefaultDatabaseEvery)
		setZero(&s.Timeout, DefaultDatabaseTimeout)
		if s.Engine == vocab.EnginePostgreSQL {
			setZero(&s.Database, "postgres")
			if strings.HasPrefix(s.Address, "/") {
				setZero(&s.Port, 5432)
			}
		}
	}
	return out
}

// ValidateDatabases checks every source; the errors name the key,
// databases[i].key, as the configuration file does.
func ValidateDatabases(sources []DatabaseSource) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(sources) > MaxDatabaseSources {
		add("databases: %d sources, want at most %d", len(sources), MaxDatabaseSources)
	}
	seen := map[string]bool{}
	for i, s := range sources {
		w := fmt.Sprintf("databases[%d]", i)
		switch {
		case s.Name == "" || len(s.Name) > 64 || strings.ContainsAny(s.Name, " \t\n/"):
			add("%s.name %q: want 1 to 64 characters without spaces or slashes", w, s.Name)
		case seen[s.Name]:
			add("%s.name %q: used twice", w, s.Name)
		}
		seen[s.Name] = true
		s.validate(w, add)
	}
	return errs
}

// collectedEngines are the engines the agent has a collector for.
var collectedEngines = []vocab.DatabaseEngine{vocab.EnginePostgreSQL, vocab.EngineMySQL, vocab.EngineMariaDB}

func (s DatabaseSource) validate(w string, add adder) {
	if !slices.Contains(collectedEngines, s.Engine) {
		add("%s.engine %q: want %s", w, s.Engine, orList(names(collectedEngines)))
	}
	switch {
	case s.Address == "":
		add("%s.address: required (host:port, or the socket's absolute path)", w)
	case strings.HasPrefix(s.Address, "/"):
		if path.Clean(s.Address) != s.Address {
			add("%s.address %q: want a clean absolute path", w, s.Address)
		}
	default:
		if host, port, err := net.SplitHostPort(s.Address); err != nil || host == "" || port == "" {
			add("%s.address %q: want host:port or an absolute socket path", w, s.Address)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		add("%s.port %d: want 1 to 65535", w, s.Port)
	}
	if s.Engine != vocab.EnginePostgreSQL && s.Database != "" {
		add("%s.database: only for postgresql (performance_schema is read whatever the default database)", w)
	}
	if s.User == "" {
		add("%s.user: required (the monitoring role)", w)
	}
	if s.PasswordFile != "" && !path.IsAbs(s.PasswordFile) {
		add("%s.password_file %q: want an absolute path", w, s.PasswordFile)
	}
	if s.Root != "" && (!path.IsAbs(s.Root) || path.Clean(s.Root) != s.Root) {
		add("%s.root %q: want a clean absolute path", w, s.Root)
	}
	if s.Every < MinDatabaseEvery || s.Every > MaxDatabaseEvery {
		add("%s.every %s: want %s to %s", w, s.Every, MinDatabaseEvery, MaxDatabaseEvery)
	}
	if s.Timeout <= 0 || s.Timeout > MaxDatabaseTimeout || s.Timeout >= s.Every {
		add("%s.timeout %s: want more than 0, at most %s and less than every", w, s.Timeout, MaxDatabaseTimeout)
	}
}

func names[T ~string](ws []T) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w)
	}
	return out
}
