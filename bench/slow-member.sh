#!/usr/bin/env bash
# slow-member.sh — the slow member named, end to end, on members that are
# kernel block devices (docs/lab.md, "Members as block devices"; issue
# section "the slow member, named"). Two parts:
#
#  1. Live trials (bench/slow-member): TRIALS lab arrays (RAID 1 × 2,
#     RAID 5 × 4, RAID 10 × 4 in turn; PRESET members, each a loop device
#     whose FUSE file takes the member's time and faults) and CONTROLS
#     healthy ones, ext4 on each, a steady 8 KiB random read/write load
#     (RATE ops/s per array, 30% writes, direct I/O), `server --dev` and
#     `agent run` on the lab's md sysfs tree at the agent's default member
#     I/O interval. After WARMUP every trial array gets one fault on one
#     member chosen at random — slowed ×2, ×3, ×5, or stalling 3% of its
#     operations for STALL — all at once; the server's judge is polled
#     until each faulted member is named or MAX passes. Right: the faulted
#     member named; wrong: any other member of the array named, at any time
#     (controls naming anything are counted apart).
#  2. Noise, two replays through the server's judge at its defaults,
#     counting members named (the last line adds them up):
#     a. the lab's healthy intervals recorded (control arrays all run, trial
#        arrays until their fault; this run's and the committed recordings
#        in bench/slow-member/testdata), NOISE_DAYS simulated days per
#        array, NOISE_WALKS block-bootstrap walks each;
#     b. the judge's own week of member noise recorded on this machine's
#        disk (internal/lab/membernoise, TestReplayNoise).
#
#   sudo bench/slow-member.sh                    # ~25 min
#   TRIALS=4 CONTROLS=1 WARMUP=2m bench/slow-member.sh
#   JUDGE=none bench/slow-member.sh              # the kernel's evidence only, no server
#   SEED=2 bench/slow-member.sh                  # other members faulted, other load
#   KINDS=stall3pct TRIALS=6 bench/slow-member.sh   # one fault kind only
#
# Needs: root, /dev/fuse, go, mkfs.ext4. The last line:
#   trials=N right_member=R wrong_member=W median_seconds=S noise_days=D noise_named=Z
# The whole script is one block, read before it runs: editing this file
# while a run goes on cannot change what that run does.
{
set -euo pipefail
cd "$(dirname "$0")/.."

TRIALS=${TRIALS:-12}
CONTROLS=${CONTROLS:-2}
PRESET=${PRESET:-sas15k}
RATE=${RATE:-25}
WARMUP=${WARMUP:-5m}
MAX=${MAX:-15m}
STALL=${STALL:-100ms}
SEED=${SEED:-1}
KINDS=${KINDS:-}
JUDGE=${JUDGE:-server}
MEMBER_EVERY=${MEMBER_EVERY:-0}
NOISE_DAYS=${NOISE_DAYS:-7}
NOISE_WALKS=${NOISE_WALKS:-4}
NOISE_FROM=${NOISE_FROM:-$(ls bench/slow-member/testdata/*.jsonl.gz 2>/dev/null | paste -sd, -)}
BENCH_DIR=${BENCH_DIR:-/var/tmp/plumbline-slow-member}
BIN=${BIN:-$BENCH_DIR/bin}

say() { printf '==> %s\n' "$*" >&2; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
mkdir -p "$BENCH_DIR" "$BIN"
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o "$BIN/" ./cmd/server ./cmd/agent
go build -o "$BIN/slow-member" ./bench/slow-member

say "1. live trials: $TRIALS faulted arrays + $CONTROLS controls, $PRESET members, $RATE ops/s each, warm-up $WARMUP, at most $MAX"
rm -rf "$BENCH_DIR/run"
live=$("$BIN/slow-member" -bin "$BIN" -dir "$BENCH_DIR/run" -judge "$JUDGE" -trials "$TRIALS" -controls "$CONTROLS" \
  -preset "$PRESET" -rate "$RATE" -warmup "$WARMUP" -max "$MAX" -stall "$STALL" -seed "$SEED" -kinds "$KINDS" -member-every "$MEMBER_EVERY" \
  -record "$BENCH_DIR/members.jsonl" | tail -1)
say "live: $live"

say "2a. noise: the lab's healthy member intervals (this run's and NOISE_FROM's) replayed for $NOISE_DAYS days per array through the judge"
rec=$BENCH_DIR/members.jsonl
[[ -n $NOISE_FROM ]] && rec=$rec,$NOISE_FROM
lab_noise=$("$BIN/slow-member" -replay "$rec" -days "$NOISE_DAYS" -walks "$NOISE_WALKS" 2>"$BENCH_DIR/noise.log" | tail -1) || lab_noise=
say "lab noise: ${lab_noise:-not run (see $BENCH_DIR/noise.log)}"
say "2b. noise: the judge's own week of recorded member noise (internal/lab/membernoise)"
disk_noise=$(go test -count=1 -run '^TestReplayNoise$' -v ./internal/lab/membernoise/ 2>&1 | grep -o 'noise_days=.*' | tail -1) || disk_noise=
say "disk noise: ${disk_noise:-not run}"
# The line's noise: a member named in either replay counts; days are per replay.
noise_days=NA noise_named=NA
a=$(field noise_named "$lab_noise") b=$(field noise_named "$disk_noise")
if [[ -n $a && -n $b ]]; then
  noise_days=$(field noise_days "$lab_noise") noise_named=$((a + b))
elif [[ -n $a || -n $b ]]; then
  noise_days=$(field noise_days "$lab_noise$disk_noise") noise_named=$a$b
fi
say "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "trials=$(field trials "$live") right_member=$(field right_member "$live") wrong_member=$(field wrong_member "$live")" \
  "median_seconds=$(field median_seconds "$live") noise_days=${noise_days:-NA} noise_named=${noise_named:-NA}"
exit
}
