#!/usr/bin/env bash
# seeds.sh — the seeds' alignment experiments (DESIGN.md §1, measured
# effects) reproduced on RAID lab arrays (internal/lab/raidlab): an emulated
# array served through FUSE under a loop device with direct I/O, real
# partitions made by parted at 63 / 128 / 2048 sectors, a real file system,
# Plumbline's probe engine (`agent probe`, 8 KiB random reads and writes at
# QD 8; synced log writes at QD 1) and fio on the same probe file.
#
#   sudo bench/seeds.sh                       # all five experiments, ~20-30 min
#   ROUNDS=3 OPS=1000 bench/seeds.sh --only raid10-64k-31.5k
#   FS=xfs bench/seeds.sh                     # or ext4 (4 KiB blocks); default ext4-bigalloc (64 KiB clusters)
#
# Prints a table and ends with one line per experiment:
#   experiment=<id> predicted=<split fraction> measured=<IOPS loss as a fraction> ...
# predicted comes from internal/align.SplitFraction (split share at the
# tested offset minus at the reference one); measured is the median over
# rounds of 1 − IOPS(tested)/IOPS(reference) from `agent probe`, averaged
# over the experiment's two workloads (read/write, or 8/64 KiB log writes).
#
# Env (defaults): ROUNDS=5 OPS=2000 LOG_OPS=1000 PRESET=sas15k FS=ext4-bigalloc
#   FILE_MIB=256 WORK=/var/tmp/plumbline-seeds
# Needs: root, /dev/fuse, go, parted, partx, mkfs.ext4/mkfs.xfs, fio.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
OPS=${OPS:-2000}
LOG_OPS=${LOG_OPS:-1000}
PRESET=${PRESET:-sas15k}
FS=${FS:-ext4-bigalloc}
FILE_MIB=${FILE_MIB:-256}
WORK=${WORK:-/var/tmp/plumbline-seeds}

mkdir -p "$WORK"
go build -o "$WORK/seeds" ./bench/seeds
go build -o "$WORK/agent" ./cmd/agent
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$WORK/seeds" -agent "$WORK/agent" -work "$WORK" -preset "$PRESET" -fs "$FS" \
  -rounds "$ROUNDS" -ops "$OPS" -log-ops "$LOG_OPS" -file-mib "$FILE_MIB" "$@"
