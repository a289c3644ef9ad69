#!/usr/bin/env bash
# degrade-tails.sh — detection time per fault kind for degradation the
# median cannot see (issue 15), on real probe runs on a RAID lab array:
# a member slowed ×3 (the median's case, as bench/degrade.sh), a member stalling 3% of its ops
# for 100 ms, a token-bucket throttle (20 IOPS, burst 30) and a
# rebuild-style background load (0.8 of every member's time). The probe
# runs are real I/O (ext4 on the lab's loop device, Plumbline's probe
# engine: 8 KiB random reads at QD 1, OPS per run under an IOPS cap); the
# schedule between them is simulated (EVERY), so the 3-minute schedule is
# measured in minutes of wall time, not hours. Then the healthy runs
# recorded on the way are replayed at random as REPLAY_DAYS of noise.
#
#   sudo bench/degrade-tails.sh                    # ~5-10 min
#   TRIALS=1 bench/degrade-tails.sh --only stall,throttle
#
# Ends with one line per fault kind and one for the replay:
#   fault=<kind> signal=<signal:trials> runs=[<faulted runs to degraded>...] detect_seconds=<median>
#   false_alerts=<n> replay_days=<d> healthy_runs=<n>
# detect_seconds = runs × EVERY + the evaluator's pass (30 s) + the
# alert's for: (FOR).
#
# Env (defaults): EVERY=3m OPS=50 IOPS=100 TRIALS=3 FOR=5m PRESET=sas15k
#   LEVEL=raid1 DISKS=2 REPLAY_DAYS=7 WORK=/var/tmp/plumbline-tails
# Needs: root, /dev/fuse, go, mkfs.ext4.
set -euo pipefail
cd "$(dirname "$0")/.."

EVERY=${EVERY:-3m}
OPS=${OPS:-50}
IOPS=${IOPS:-100}
TRIALS=${TRIALS:-3}
FOR=${FOR:-5m}
PRESET=${PRESET:-sas15k}
LEVEL=${LEVEL:-raid1}
DISKS=${DISKS:-2}
REPLAY_DAYS=${REPLAY_DAYS:-7}
WORK=${WORK:-/var/tmp/plumbline-tails}

mkdir -p "$WORK"
go build -o "$WORK/tails" ./bench/tails
go build -o "$WORK/raidlab" ./cmd/raidlab
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$WORK/tails" -raidlab "$WORK/raidlab" -work "$WORK" -every "$EVERY" -ops "$OPS" -iops "$IOPS" \
  -trials "$TRIALS" -for "$FOR" -preset "$PRESET" -level "$LEVEL" -disks "$DISKS" -replay-days "$REPLAY_DAYS" "$@"
