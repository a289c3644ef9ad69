#!/usr/bin/env bash
# degrade.sh — degradation detection proven on real I/O (docs/degradation.md, "Degradation
# on the lab" and "Degradation: median, tail, mean, rate"), at the SHIPPED
# detector defaults (baseline.DefaultConfig) and alert rules. Four parts:
#
#  1. Noise-only replay: the committed noise recordings
#     (internal/lab/replay/testdata: this machine's own disk with its bimodal
#     synced writes, a lab RAID 1 of sas15k members) replayed for DAYS
#     simulated days on a cohort of five volumes and a control, on the old
#     (1h, 1,000 ops) and the default schedule (3m, 50 ops), through ingest,
#     the store and the evaluator; every alert the rules would raise is
#     counted (false_alerts).
#  2. A 2× slowdown replayed at TRIALS fault times per schedule: simulated
#     fault-to-firing.
#  3. Every fault kind on real probe runs on a lab array (bench/tails): a
#     member slowed ×3, one member stalling 3% of its ops for 100 ms, a
#     token-bucket throttle (20 IOPS, burst 30), a rebuild-style load (0.8
#     of every member's time); FAULT_TRIALS trials each at the 3-minute
#     schedule (simulated between real runs), 50 ops under a 100 IOPS cap;
#     detection = faulted runs × 3m + the evaluator's 30 s pass + the
#     alert's for: 2m. FAULT_LEVEL/FAULT_DISKS choose the array (raid1 × 2;
#     1 × 1 for a single disk).
#  4. Live (SKIP_LIVE=1 leaves it out): the whole product on lab arrays
#     (bench/degrade → internal/lab/fleetlab): five RAID 1 arrays of sas15k
#     members (one cohort), one always 3× slow, one RAID 10 control;
#     `server --dev`, `agent run` with the agent's default schedule
#     (EVERY/OPS override it), Prometheus scraping every SCRAPE with
#     deploy/prometheus/plumbline.rules.yml as shipped. Once the cohort's
#     histories are trusted (~36 min at the default 3m), member 0 of the
#     first array is slowed 3×; fault → firing; restore → resolved.
#
#   sudo bench/degrade.sh                    # ~75-85 min with the live run
#   SKIP_LIVE=1 bench/degrade.sh             # parts 1-3 (~15-20 min)
#   SKIP_LIVE=1 FAULT_LEVEL=raid1 FAULT_DISKS=1 bench/degrade.sh   # a single disk
#   EVERY=20s OPS=50 bench/degrade.sh        # the live run compressed
#
# Needs: root, /dev/fuse, go, mkfs.ext4 (live: prometheus, parted). Prints a
# line per fault kind (part 3), then the last line:
#   slow_seconds=<s> stall_seconds=<s> throttle_seconds=<s> rebuild_seconds=<s> false_alerts=<n> replay_days=<d> detect_seconds=<live> clear_seconds=<live>
# (a fault kind not detected within FAULT_MAX_RUNS runs: none; live not run: NA).
set -euo pipefail
cd "$(dirname "$0")/.."

DAYS=${DAYS:-7}
TRIALS=${TRIALS:-6}
EVERY=${EVERY:-}
OPS=${OPS:-}
SCRAPE=${SCRAPE:-1m}
BENCH_DIR=${BENCH_DIR:-/var/tmp/plumbline-degrade}
BIN=${BIN:-$BENCH_DIR/bin}
SKIP_LIVE=${SKIP_LIVE:-0}
FAULT_TRIALS=${FAULT_TRIALS:-3}
FAULT_LEVEL=${FAULT_LEVEL:-raid1}
FAULT_DISKS=${FAULT_DISKS:-2}
FAULT_MAX_RUNS=${FAULT_MAX_RUNS:-14}
FAULT_WORK=${FAULT_WORK:-/var/tmp/plumbline-tails}

say() { printf '==> %s\n' "$*" >&2; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
mkdir -p "$BENCH_DIR" "$BIN" "$FAULT_WORK"
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o "$BIN/" ./cmd/server ./cmd/agent ./cmd/raidlab ./bench/degrade ./bench/tails

say "1. noise-only replay: $DAYS simulated days per recording and schedule"
replay_log=$BENCH_DIR/replay.log
go test -count=1 -timeout 60m -run '^TestNoiseReplay$' ./internal/lab/replay -v -replay.days="$DAYS" | tee "$replay_log" >&2
total=$(grep -o 'replay-total: .*' "$replay_log" | tail -1)
false_alerts=$(field false_alerts "$total")
replay_days=$(field replay_days "$total")
[[ -n $false_alerts && -n $replay_days ]] || { echo "degrade.sh: no replay total in $replay_log" >&2; exit 1; }

say "2. 2x slowdown replayed at $TRIALS fault times per schedule (simulated time)"
go test -count=1 -timeout 60m -run '^TestReplayDetects$' ./internal/lab/replay -v -replay.trials="$TRIALS" | grep -E 'detect-|^(ok|FAIL|---)' >&2

say "3. every fault kind on real probe runs: $FAULT_LEVEL x $FAULT_DISKS sas15k, 3m schedule, 50 ops, $FAULT_TRIALS trials"
faults=$("$BIN/tails" -raidlab "$BIN/raidlab" -work "$FAULT_WORK" -level "$FAULT_LEVEL" -disks "$FAULT_DISKS" \
  -trials "$FAULT_TRIALS" -max-runs "$FAULT_MAX_RUNS" -replay-days "$DAYS")
echo "$faults"
declare -A seconds
for kind in slow stall throttle rebuild; do
  seconds[$kind]=$(field detect_seconds "$(grep "^fault=$kind " <<<"$faults" || true)")
done

detect=NA clear=NA
if [[ $SKIP_LIVE != 1 ]]; then
  say "4. live: lab arrays, server, agent (every ${EVERY:-default}, ops ${OPS:-default}), prometheus (scrape $SCRAPE)"
  args=(-bin "$BIN" -dir "$BENCH_DIR/run" -scrape "$SCRAPE")
  [[ -n $EVERY ]] && args+=(-every "$EVERY")
  [[ -n $OPS ]] && args+=(-ops "$OPS")
  live=$("$BIN/degrade" "${args[@]}" | tail -1)
  detect=$(field detect_seconds "$live")
  clear=$(field clear_seconds "$live")
  say "live: $live"
fi
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "slow_seconds=${seconds[slow]:-NA} stall_seconds=${seconds[stall]:-NA} throttle_seconds=${seconds[throttle]:-NA}" \
  "rebuild_seconds=${seconds[rebuild]:-NA} false_alerts=$false_alerts replay_days=$replay_days detect_seconds=$detect clear_seconds=$clear"
