#!/usr/bin/env bash
# stripescan.sh — the geometry probe (`agent probe --kind stripe-scan`)
# against RAID lab arrays of known geometry and against devices with no
# stripe: does it infer the right unit, how many 2,000-op runs does it need,
# and how often does noise alone make it infer one?
#
#   sudo bench/stripescan.sh                  # detection table + noise runs + misaligned partition, ~25 min
#   PRESETS=ssd NOISE_RUNS=10 bench/stripescan.sh
#
# Env (defaults): PRESETS="sas15k ssd" MAX_RUNS=3 IOPS=100 (the default
#   schedule's cap) NOISE_RUNS=50 MIS_OPS=6000 WORK=/var/tmp/plumbline-stripescan
#   RESULTS=bench/RESULTS-stripescan.md (appended; RESULTS= to skip)
# Lab arrays live under their own state and data roots (…-stripescan): the
# script never lists, reaps or downs anyone else's.
# Needs: root, /dev/fuse, go, parted, mkfs.ext4, losetup, python3.
set -euo pipefail
cd "$(dirname "$0")/.."

PRESETS=${PRESETS:-"sas15k ssd"}
MAX_RUNS=${MAX_RUNS:-3}
IOPS=${IOPS:-100}
NOISE_RUNS=${NOISE_RUNS:-50}
MIS_OPS=${MIS_OPS:-6000}
WORK=${WORK:-/var/tmp/plumbline-stripescan}
RESULTS=${RESULTS-bench/RESULTS-stripescan.md}
export PLUMBLINE_RAIDLAB_ROOT=/run/plumbline-raidlab-stripescan
DATA_ROOT=/var/tmp/plumbline-raidlab-stripescan

mkdir -p "$WORK"
go build -o "$WORK/agent" ./cmd/agent
go build -o "$WORK/raidlab" ./cmd/raidlab
AGENT=$WORK/agent
RAIDLAB=$WORK/raidlab
OUT=$WORK/table.txt
: >"$OUT"
CLEAN=()
cleanup() {
	for ((i = ${#CLEAN[@]} - 1; i >= 0; i--)); do eval "${CLEAN[$i]}" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
trap "exit 130" INT TERM

# scan DIR [extra agent flags] → one JSON line: unit confidence cost ops
scan() {
	local dir=$1
	shift
	"$AGENT" probe --kind stripe-scan --dir "$dir" --file-size 64MiB --fill-rate 0 --iops "$IOPS" --format json "$@" 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); s=d["stripe_scan"]; print(s["inferred_stripe_unit_bytes"], "%.4f" % s["confidence"], "%.0f" % (s["straddle_cost_seconds"]*1e6), d["ops"], d["stopped_reason"] or "-")'
}

# lab LEVEL DISKS UNIT PRESET START_SECTOR → mounted directory (sets LAB_DEV)
lab() {
	local level=$1 disks=$2 unit=$3 preset=$4 start=$5 name=stripescan-$1-$2-$4-$5
	LAB_DEV=$("$RAIDLAB" up --level "$level" --disks "$disks" --stripe-unit "$unit" --size 512MiB --preset "$preset" --data-root "$DATA_ROOT" 2>/dev/null | tail -1)
	CLEAN+=("$RAIDLAB down $LAB_DEV")
	parted -s "$LAB_DEV" mklabel msdos mkpart primary "${start}s" 100%
	for _ in $(seq 50); do [ -b "${LAB_DEV}p1" ] && break; sleep 0.1; done
	mkfs.ext4 -q -F "${LAB_DEV}p1"
	mkdir -p "$WORK/$name"
	mount "${LAB_DEV}p1" "$WORK/$name"
	CLEAN+=("umount $WORK/$name")
	LAB_DIR=$WORK/$name
}

down_last_lab() { # unmount and stop the newest lab now (frees the CPU for the next)
	eval "${CLEAN[-1]}"; unset 'CLEAN[-1]'
	eval "${CLEAN[-1]}"; unset 'CLEAN[-1]'
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), IOPS cap $IOPS" | tee -a "$OUT"
printf '%-7s %-7s %-6s %-8s | %-9s %-6s %-10s %-8s %s\n' preset level disks unit inferred runs confidence cost_us ops | tee -a "$OUT"
for preset in $PRESETS; do
	for geo in "raid10 4 64KiB 65536" "raid5 5 128KiB 131072" "raid0 2 256KiB 262144" "raid1 2 64KiB 0" "single 1 64KiB 0"; do
		set -- $geo
		lab "$1" "$2" "$3" "$preset" 2048
		want=$4 runs=- got=0 conf=- cost=- ops=0 wrong=0
		for r in $(seq "$MAX_RUNS"); do
			read -r u c k o stop < <(scan "$LAB_DIR")
			ops=$((ops + o))
			[ "$u" != 0 ] && [ "$u" != "$want" ] && wrong=$((wrong + 1))
			if [ "$u" = "$want" ] && [ "$want" != 0 ]; then runs=$r got=$u conf=$c cost=$k; break; fi
			got=$u conf=$c
		done
		[ "$want" = 0 ] && runs="$MAX_RUNS"
		unitcol=$3
		[ "$want" = 0 ] && unitcol="(none)"
		printf '%-7s %-7s %-6s %-8s | %-9s %-6s %-10s %-8s %s%s\n' "$preset" "$1" "$2" "$unitcol" "$got" "$runs" "$conf" "$cost" "$ops" \
			"$([ $wrong -gt 0 ] && echo " WRONG x$wrong")" | tee -a "$OUT"
		down_last_lab
	done
done

# Noise only: devices with no stripe, many runs, uncapped (they are fast).
noise() { # NAME DIR RUNS
	local false=0 n=0
	for _ in $(seq "$3"); do
		read -r u c k o stop < <(IOPS=0 scan "$2")
		n=$((n + 1))
		[ "$u" != 0 ] && false=$((false + 1))
	done
	printf 'noise   %-26s runs %3d  false inferences %d\n' "$1" "$n" "$false" | tee -a "$OUT"
}
truncate -s 1GiB "$WORK/plain.img"
LOOP=$(losetup --find --show --direct-io=on "$WORK/plain.img")
CLEAN+=("losetup -d $LOOP" "rm -f $WORK/plain.img")
mkfs.ext4 -q -F "$LOOP"
mkdir -p "$WORK/plain"
mount "$LOOP" "$WORK/plain"
CLEAN+=("umount $WORK/plain")
noise "plain loop device ($(basename "$LOOP"))" "$WORK/plain" "$NOISE_RUNS"
mkdir -p "$WORK/owndisk"
noise "this machine's disk ($(findmnt -no SOURCE --target "$WORK" | xargs basename))" "$WORK/owndisk" $((NOISE_RUNS / 2))
CLEAN+=("$AGENT probe --cleanup --dir $WORK/owndisk")
lab single 1 64KiB ssd 2048
noise "lab single disk, ssd preset" "$LAB_DIR" $((NOISE_RUNS / 2))
down_last_lab

# A misaligned partition (63 sectors, the seeds' 31.5 KiB) and an aligned
# one on the same RAID 10 4 × 64 KiB sas15k array: the random-read probe's
# mean latency penalty, the split fractions the lab counted, and the
# stripe-scan's straddle cost on the misaligned one.
LAB_DEV=$("$RAIDLAB" up --level raid10 --disks 4 --stripe-unit 64KiB --size 1GiB --preset sas15k --data-root "$DATA_ROOT" 2>/dev/null | tail -1)
CLEAN+=("$RAIDLAB down $LAB_DEV")
parted -s "$LAB_DEV" mklabel msdos mkpart primary 63s 400MiB mkpart primary 512MiB 100%
for _ in $(seq 50); do [ -b "${LAB_DEV}p2" ] && break; sleep 0.1; done
for p in 1 2; do
	mkfs.ext4 -q -F "${LAB_DEV}p$p"
	mkdir -p "$WORK/mis$p"
	mount "${LAB_DEV}p$p" "$WORK/mis$p"
	CLEAN+=("umount $WORK/mis$p")
done
read -r u c k o stop < <(IOPS=0 scan "$WORK/mis1")
echo "misaligned (63s) raid10 4x64KiB sas15k: stripe-scan inferred $u, confidence $c, straddle cost ${k} µs" | tee -a "$OUT"
split_share() { # DEV PART_DIR → "<mean latency µs> <split fraction counted by the lab>"
	local before after
	before=$("$RAIDLAB" stats "$1" --format json)
	lat=$("$AGENT" probe --dir "$2" --file-size 64MiB --fill-rate 0 --iops 0 --ops "$MIS_OPS" --format json 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["latency_seconds"]["mean"]*1e6))')
	after=$("$RAIDLAB" stats "$1" --format json)
	python3 - "$before" "$after" "$lat" <<'PY'
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def g(d, *ks):
    for k in ks:
        if k in d: return d[k]
    return 0
reqs = g(a, "read_requests", "ReadRequests") - g(b, "read_requests", "ReadRequests")
split = g(a, "split_reads", "SplitReads") - g(b, "split_reads", "SplitReads")
print(sys.argv[3], "%.4f" % (split / max(reqs, 1)))
PY
}
"$AGENT" probe --dir "$WORK/mis1" --file-size 64MiB --fill-rate 0 --iops 0 --ops 10 >/dev/null 2>&1
"$AGENT" probe --dir "$WORK/mis2" --file-size 64MiB --fill-rate 0 --iops 0 --ops 10 >/dev/null 2>&1
read -r lat1 f1 < <(split_share "$LAB_DEV" "$WORK/mis1")
read -r lat2 f2 < <(split_share "$LAB_DEV" "$WORK/mis2")
python3 - "$lat1" "$f1" "$lat2" "$f2" "$k" <<'PY' | tee -a "$OUT"
import sys
l1, f1, l2, f2, scan = map(float, sys.argv[1:])
# Lab member model (sas15k): an unsplit 8 KiB read takes fixed + U(0, 4 ms) +
# 8 KiB transfer; a split one the slower of two members, each 4 KiB:
# E[max of two U(0, 4 ms)] − E[U(0, 4 ms)] = 4/6 ms, minus 4 KiB at 150 MB/s.
model = 4000 / 6 - 4096 / 150e6 * 1e6
pen = l1 - l2
df = f1 - f2
print(f"random-read 8 KiB, {sys.argv[0] and ''}misaligned mean {l1:.0f} µs (lab counted {f1:.1%} split), aligned {l2:.0f} µs ({f2:.1%} split)")
print(f"penalty {pen:.0f} µs / split-fraction difference {df:.1%} = {pen / df if df else float('nan'):.0f} µs per split read; "
      f"stripe-scan straddle cost {scan:.0f} µs; lab member model {model:.0f} µs")
PY

if [ -n "$RESULTS" ]; then
	{
		echo
		echo "## $(date -u +%F) \`sudo bench/stripescan.sh\` (PRESETS=\"$PRESETS\" MAX_RUNS=$MAX_RUNS IOPS=$IOPS NOISE_RUNS=$NOISE_RUNS)"
		echo
		echo '```'
		cat "$OUT"
		echo '```'
	} >>"$RESULTS"
fi
