#!/usr/bin/env bash
# db-attribution.sh — the database's own I/O latency beside the probe's,
# proven on real databases and real I/O (docs/measurements.md, "Database
# I/O and attribution"). As root:
#
#   sudo bench/db-attribution.sh                       # 3 databases × 3 scenarios × ROUNDS
#   ROUNDS=1 ONLY=device bench/db-attribution.sh       # one scenario, one trial per database
#   SMOKE=60s bench/db-attribution.sh                  # the harness alone: databases up on lab arrays, loads, views
#
# Three lab arrays (internal/lab/raidlab: RAID 0 × 2 sas15k members, 64 KiB
# chunks, ext4; LEVEL=raid5 or raid1 for another; a RAID 1 mirror reads from
# its healthy member and hides a slow one from the database's reads),
# each holding one database's data directory: the host's PostgreSQL 15
# (pg_stat_database, pg_stat_wal), PostgreSQL 17 from a Debian trixie root
# (debootstrap, cached as $ROOTFS_CACHE/trixie-pg17.tar; run with chroot;
# pg_stat_io) and MariaDB (performance_schema.file_summary_by_instance).
# pgbench and sysbench run a light rate-limited load on each; the whole
# product (server --dev, agent run with the three as database sources and
# probes on the three arrays every EVERY) watches. Scenarios, one after the
# other on each database, the databases in parallel:
#   device    member 0 slowed ×FACTOR (raidlab fault slow)       expect device
#   load      the workload's clients and rate ×LOAD_X            expect load-or-database
#   throttle  token bucket THROTTLE_IOPS, burst 30 (raidlab)     expect throttle
# Ground truth: each database's own views, read every SAMPLE by the bench
# itself, over the interval of every database record the server stored: E
# is how far a reported latency lies outside what the views allow over
# that interval (their deltas over the samples just inside and just
# outside it; 0 within), the log adds the nearest samples' difference.
# Then the collection's cost: the agent's CPU and pgbench's TPS with the
# database sources on and off (COST_ROUNDS windows of COST_WINDOW each).
#
# Needs: root, /dev/fuse, go, parted, mkfs.ext4, debootstrap (first run),
# postgresql (15, with pgbench), mariadb-server, sysbench.
# Last lines, one per scenario:
#   scenario=<device|load|throttle> trials=N correct=M median_seconds=S db_latency_error=E
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_DIR=${BENCH_DIR:-/var/tmp/plumbline-db-attribution}
BIN=${BIN:-/var/tmp/plumbline-db-attribution-bin}
ROOTFS_CACHE=${ROOTFS_CACHE:-/var/cache/plumbline-dbbench}
ROUNDS=${ROUNDS:-2}
ONLY=${ONLY:-}
EVERY=${EVERY:-20s}
DB_EVERY=${DB_EVERY:-20s}
FACTOR=${FACTOR:-3}
LOAD_X=${LOAD_X:-8}
THROTTLE_IOPS=${THROTTLE_IOPS:-20}
COST_ROUNDS=${COST_ROUNDS:-2}
COST_WINDOW=${COST_WINDOW:-60s}
SMOKE=${SMOKE:-0}

say() { printf '==> %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || { echo "db-attribution.sh: run as root" >&2; exit 2; }
for tool in parted mkfs.ext4 pgbench mariadbd sysbench debootstrap; do
  command -v "$tool" >/dev/null || { echo "db-attribution.sh: $tool not found (apt-get install -y postgresql mariadb-server sysbench debootstrap parted)" >&2; exit 2; }
done
mkdir -p "$BIN"
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o "$BIN/" ./cmd/server ./cmd/agent ./cmd/raidlab ./bench/db-attribution
say "trixie root with PostgreSQL 17 (cached in $ROOTFS_CACHE)"
rootfs=$(bench/db-attribution/rootfs.sh "$ROOTFS_CACHE")
log=$BENCH_DIR.log
say "running; log: $log"
"$BIN/db-attribution" -bin "$BIN" -dir "$BENCH_DIR" -rootfs "$rootfs" -rounds "$ROUNDS" -only "$ONLY" \
  -every "$EVERY" -db-every "$DB_EVERY" -factor "$FACTOR" -load-x "$LOAD_X" -throttle-iops "$THROTTLE_IOPS" \
  -cost-rounds "$COST_ROUNDS" -cost-window "$COST_WINDOW" -smoke "$SMOKE" -sample "${SAMPLE:-1s}" -level "${LEVEL:-raid0}" -soak "${SOAK:-0s}" 2> >(tee "$log" >&2)
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
