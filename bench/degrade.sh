#!/usr/bin/env bash
# degrade.sh — degradation detection proven on real I/O (README, "Degradation
# on the lab"). Two halves:
#
#  1. Noise-only replay: the committed noise recordings
#     (internal/replay/testdata: this machine's own disk, a lab RAID 1 of
#     sas15k members) replayed for DAYS simulated days on a cohort of five
#     volumes and a control, on the old (1h, 1,000 ops, for: 15m) and the
#     new default schedule (3m, 50 ops, for: 5m), through ingest, the store
#     and the evaluator; every alert the rules would raise is counted. Then
#     a 2× slowdown replayed at TRIALS fault times per schedule: simulated
#     fault-to-firing for the old and the new defaults.
#  2. Live: the whole product on lab arrays (bench/degrade → internal/fleetlab):
#     five RAID 1 arrays of sas15k members (one cohort), one always 3× slow,
#     one RAID 10 control; `server --dev`, `agent run` with the agent's
#     default schedule (EVERY/OPS override it), Prometheus scraping every
#     SCRAPE with deploy/prometheus/plumbline.rules.yml as shipped. Once the
#     cohort's histories are trusted (12 runs: ~36 min at the default 3m),
#     member 0 of the first array is slowed 3×; fault → firing; restore →
#     resolved.
#
#   sudo bench/degrade.sh                 # ~60-70 min with the defaults
#   EVERY=20s OPS=50 bench/degrade.sh      # the same experiment compressed
#   SKIP_LIVE=1 bench/degrade.sh           # the replay only (~5 min)
#
# Needs: root, /dev/fuse, go, prometheus, parted, mkfs.ext4. The last line is
#   detect_seconds=<fault to firing> clear_seconds=<restore to resolved> false_alerts=<count over the noise-only replay> replay_days=<simulated days>
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

say() { printf '==> %s\n' "$*" >&2; }
mkdir -p "$BENCH_DIR" "$BIN"
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o "$BIN/" ./cmd/server ./cmd/agent ./cmd/raidlab ./bench/degrade

say "noise-only replay: $DAYS simulated days per recording and schedule"
replay_log=$BENCH_DIR/replay.log
go test -count=1 -timeout 60m -run '^TestNoiseReplay$' ./internal/replay -v -replay.days="$DAYS" | tee "$replay_log" >&2
total=$(grep -o 'replay-total: .*' "$replay_log" | tail -1)
false_alerts=$(sed -n 's/.*false_alerts=\([0-9]*\).*/\1/p' <<<"$total")
replay_days=$(sed -n 's/.*replay_days=\([0-9.]*\).*/\1/p' <<<"$total")
[[ -n $false_alerts && -n $replay_days ]] || { echo "degrade.sh: no replay total in $replay_log" >&2; exit 1; }

say "2x slowdown replayed at $TRIALS fault times per schedule (simulated time)"
go test -count=1 -timeout 60m -run '^TestReplayDetects$' ./internal/replay -v -replay.trials="$TRIALS" | grep -E 'detect-|^(ok|FAIL|---)' >&2

detect=NA clear=NA
if [[ $SKIP_LIVE != 1 ]]; then
  say "live: lab arrays, server, agent (every ${EVERY:-default}, ops ${OPS:-default}), prometheus (scrape $SCRAPE)"
  args=(-bin "$BIN" -dir "$BENCH_DIR/run" -scrape "$SCRAPE")
  [[ -n $EVERY ]] && args+=(-every "$EVERY")
  [[ -n $OPS ]] && args+=(-ops "$OPS")
  live=$("$BIN/degrade" "${args[@]}" | tail -1)
  detect=$(sed -n 's/.*detect_seconds=\([0-9]*\).*/\1/p' <<<"$live")
  clear=$(sed -n 's/.*clear_seconds=\([0-9]*\).*/\1/p' <<<"$live")
  say "live: $live"
fi
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "detect_seconds=$detect clear_seconds=$clear false_alerts=$false_alerts replay_days=$replay_days"
