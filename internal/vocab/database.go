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
}{
	{DBOpRead, "blocks or bytes read from the database's files"},
	{DBOpWrite, "blocks or bytes written to the database's files"},
	{DBOpExtend, "relation files grown by a block (PostgreSQL)"},
	{DBOpWriteback, "writes the kernel was asked to start (PostgreSQL writeback)"},
	{DBOpFsync, "data files made durable (fsync)"},
	{DBOpWALWrite, "write-ahead or redo log written"},
	{DBOpWALSync, "write-ahead or redo log made durable (the commit's wait)"},
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

// DatabaseOpDoc says what operation o counts; "" for an unknown one.
func DatabaseOpDoc(o DatabaseOp) string {
	for _, d := range databaseOps {
		if d.op == o {
			return d.doc
		}
	}
	return ""
}
