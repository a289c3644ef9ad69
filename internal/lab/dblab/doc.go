// Package dblab runs real databases for the database-I/O bench
// (bench/db-attribution.sh): a PostgreSQL from the host's Debian
// binaries, a PostgreSQL from a Debian root (chroot: PostgreSQL 17 with
// pg_stat_io on a bookworm host), a MariaDB with performance_schema on,
// each with its data directory where the caller says (a lab array's file
// system), a monitoring role for the agent, and their loads (pgbench,
// sysbench). It reads the databases' own statistics views — the ground
// truth the agent's figures are checked against — with its own queries,
// independently of the agent's collector.
//
// It shells out to initdb, pg_ctl, mariadb-install-db, mariadbd,
// pgbench, sysbench, chroot, mount and runuser: bench and test code,
// never imported by the agent or the server.
//
// Linux only: the rest of the package builds on Linux alone.
package dblab
