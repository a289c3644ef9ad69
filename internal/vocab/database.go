package vocab

// The words of database I/O (DatabaseIO): which engine counted it, what
// location of its files a counter set belongs to, and what operation it
// counts.

// DatabaseEngine is the database that counted its own I/O
// (DatabaseIO.engine).
type DatabaseEngine string

// The database engines.
const (
	EnginePostgreSQL DatabaseEngine = "postgresql"
	EngineMySQL      DatabaseEngine = "mysql"
	EngineMariaDB    DatabaseEngine = "mariadb"
	EngineSQLServer  DatabaseEngine = "sqlserver"
)

// DatabaseEngines lists every engine.
func DatabaseEngines() []DatabaseEngine {
	return []DatabaseEngine{EnginePostgreSQL, EngineMySQL, EngineMariaDB, EngineSQLServer}
}

// DatabaseEngineNames is DatabaseEngines as strings.
func DatabaseEngineNames() []string { return names(DatabaseEngines()) }

// DatabaseLocation is what a location of a database's files is
// (DatabaseIOSet.location).
type DatabaseLocation string

// The database file locations.
const (
	LocationData       DatabaseLocation = "data"
	LocationTablespace DatabaseLocation = "tablespace"
	LocationWAL        DatabaseLocation = "wal"
	LocationFile       DatabaseLocation = "file"
)

// DatabaseLocations lists every location.
func DatabaseLocations() []DatabaseLocation {
	return []DatabaseLocation{LocationData, LocationTablespace, LocationWAL, LocationFile}
}

// DatabaseLocationNames is DatabaseLocations as strings.
func DatabaseLocationNames() []string { return names(DatabaseLocations()) }

// DatabaseOp is an operation a database counts (DatabaseIOOp.op).
type DatabaseOp string

// The database operations.
const (
	DBOpRead      DatabaseOp = "read"
	DBOpWrite     DatabaseOp = "write"
	DBOpExtend    DatabaseOp = "extend"
	DBOpWriteback DatabaseOp = "writeback"
	DBOpFsync     DatabaseOp = "fsync"
	DBOpWALWrite  DatabaseOp = "wal-write"
	DBOpWALSync   DatabaseOp = "wal-sync"
)

// databaseOps is the one list of database operations, each with what it
// counts.
var databaseOps = [...]struct {
	op  DatabaseOp
	doc string
	// waited: the workload's sessions wait for it (a read, a commit's
	// log write and sync, a relation grown); else the database's own
	// background flushing (data writes, writebacks and fsyncs by the
	// checkpointer, background writer or page cleaners), whose rate
	// follows its checkpoints rather than its clients.
	waited bool
}{
	{DBOpRead, "blocks or bytes read from the database's files", true},
	{DBOpWrite, "blocks or bytes written to the database's files", false},
	{DBOpExtend, "relation files grown by a block (PostgreSQL)", true},
	{DBOpWriteback, "writes the kernel was asked to start (PostgreSQL writeback)", false},
	{DBOpFsync, "data files made durable (fsync)", false},
	{DBOpWALWrite, "write-ahead or redo log written", true},
	{DBOpWALSync, "write-ahead or redo log made durable (the commit's wait)", true},
}

// DatabaseOps lists every database operation.
func DatabaseOps() []DatabaseOp {
	out := make([]DatabaseOp, len(databaseOps))
	for i, o := range databaseOps {
		out[i] = o.op
	}
	return out
}

// DatabaseOpNames is DatabaseOps as strings.
func DatabaseOpNames() []string { return names(DatabaseOps()) }

// DatabaseOpWaited reports whether the workload's sessions wait for
// operation o (reads, the commit's log writes and syncs, extends), as
// opposed to the database's background flushing (data writes, writebacks,
// fsyncs), whose rate follows its checkpoints; false for an unknown one.
func DatabaseOpWaited(o DatabaseOp) bool {
	for _, d := range databaseOps {
		if d.op == o {
			return d.waited
		}
	}
	return false
}

// DatabaseOpDoc says what operation o counts; "" for an unknown one.
func DatabaseOpDoc(o DatabaseOp) string {
	for _, d := range databaseOps {
		if d.op == o {
			return d.doc
		}
	}
	return ""
}
