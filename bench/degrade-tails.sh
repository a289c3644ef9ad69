#!/usr/bin/env bash
# degrade-tails.sh — part 3 of bench/degrade.sh alone: detection time per
# fault kind (member ×3, 3% stalls, throttle, rebuild) on real probe runs on
# a lab array at the shipped detector defaults, then the healthy runs
# recorded on the way replayed as noise. Arguments go to bench/tails
# (e.g. --only stall,throttle; -record FILE).
#
#   sudo bench/degrade-tails.sh                    # ~5-10 min
#   FAULT_TRIALS=1 bench/degrade-tails.sh -only stall,throttle
#
# Env: FAULT_TRIALS=3 FAULT_LEVEL=raid1 FAULT_DISKS=2 FAULT_WORK=/var/tmp/plumbline-tails
set -euo pipefail
cd "$(dirname "$0")/.."
work=${FAULT_WORK:-/var/tmp/plumbline-tails}
mkdir -p "$work"
go build -o "$work/" ./bench/tails ./cmd/raidlab
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$work/tails" -raidlab "$work/raidlab" -work "$work" -level "${FAULT_LEVEL:-raid1}" -disks "${FAULT_DISKS:-2}" \
  -trials "${FAULT_TRIALS:-3}" "$@"
