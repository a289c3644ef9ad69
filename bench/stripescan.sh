#!/usr/bin/env bash
# stripescan.sh — the geometry probe (`agent probe --kind stripe-scan`)
# against RAID lab arrays of known geometry and against devices with no
# stripe: does it infer the right unit, how many 2,000-op runs does it need,
# and how often does noise alone make it infer one?
#
#   sudo bench/stripescan.sh                  # detection table + noise runs + misaligned partition, ~30 min
#   PRESETS=ssd NOISE_RUNS=10 bench/stripescan.sh
#   PARTS=misaligned bench/stripescan.sh      # only some parts: table, noise, misaligned
#
# "runs" counts the first run, which writes the probe file and so infers
# nothing (fresh_file).
# Env (defaults): PARTS="table noise misaligned" PRESETS="sas15k ssd" MAX_RUNS=3 IOPS=100 (the default
#   schedule's cap) NOISE_RUNS=50 MIS_OPS=20000 WORK=/var/tmp/plumbline-stripescan
#   RESULTS=bench/RESULTS-stripescan.md (appended; RESULTS= to skip)
# Lab arrays live under their own state and data roots (…-stripescan): the
# script never lists, reaps or downs anyone else's.
# Needs: root, /dev/fuse, go, parted, mkfs.ext4, losetup, python3.
set -euo pipefail
cd "$(dirname "$0")/.."

PARTS=${PARTS:-"table noise misaligned"}
PRESETS=${PRESETS:-"sas15k ssd"}
MAX_RUNS=${MAX_RUNS:-3}
IOPS=${IOPS:-100}
NOISE_RUNS=${NOISE_RUNS:-50}
MIS_OPS=${MIS_OPS:-20000}
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

# scan DIR [extra agent flags] → one line: unit confidence cost_us ops stop
# (the run's JSON is kept in $WORK/runs/)
mkdir -p "$WORK/runs"
scan() {
	local dir=$1 run
	shift
	run=$WORK/runs/$(date +%s%N)-$(basename "$dir").json
	"$AGENT" probe --kind stripe-scan --dir "$dir" --file-size 64MiB --fill-rate 0 --iops "$IOPS" --format json "$@" 2>/dev/null >"$run"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["stripe_scan"]; print(s["inferred_stripe_unit_bytes"], "%.4f" % s["confidence"], "%.0f" % (s["straddle_cost_seconds"]*1e6), d["ops"], d["stopped_reason"] or "-")' "$run"
}

# lab LEVEL DISKS UNIT PRESET START_SECTOR → mounted directory (sets LAB_DEV)
lab() {
	local level=$1 disks=$2 unit=$3 preset=$4 start=$5 name=stripescan-$1-$2-$4-$5
	LAB_DEV=$("$RAIDLAB" up --level "$level" --disks "$disks" --stripe-unit "$unit" --size 512MiB --preset "$preset" --data-root "$DATA_ROOT" 2>/dev/null | tail -1)
	CLEAN+=("$RAIDLAB down $LAB_DEV")
	parted -s "$LAB_DEV" mklabel msdos mkpart primary "${start}s" 100%
	for _ in $(seq 50); do [ -b "${LAB_DEV}p1" ] && break; sleep 0.1; done
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${LAB_DEV}p1"
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
part() { [[ " $PARTS " == *" $1 "* ]]; }
part table && printf '%-7s %-7s %-6s %-8s | %-9s %-6s %-10s %-8s %s\n' preset level disks unit inferred runs confidence cost_us ops | tee -a "$OUT"
part table && for preset in $PRESETS; do
	for geo in "raid10 4 64KiB 65536" "raid5 5 128KiB 131072" "raid0 2 256KiB 262144" "raid1 2 64KiB 0" "single 1 64KiB 0"; do
		set -- $geo
		lab "$1" "$2" "$3" "$preset" 2048
		want=$4 runs=- got=0 conf=- cost=- ops=0 wrong=
		for r in $(seq "$MAX_RUNS"); do
			read -r u c k o stop < <(scan "$LAB_DIR")
			ops=$((ops + o))
			[ "$u" != 0 ] && [ "$u" != "$want" ] && wrong="$wrong $u"
			if [ "$u" = "$want" ] && [ "$want" != 0 ]; then runs=$r got=$u conf=$c cost=$k; break; fi
			got=$u conf=$c
		done
		[ "$want" = 0 ] && runs="$MAX_RUNS"
		unitcol=$3
		[ "$want" = 0 ] && unitcol="(none)"
		printf '%-7s %-7s %-6s %-8s | %-9s %-6s %-10s %-8s %s%s\n' "$preset" "$1" "$2" "$unitcol" "$got" "$runs" "$conf" "$cost" "$ops" \
			"$([ -n "$wrong" ] && echo " WRONG:$wrong")" | tee -a "$OUT"
		down_last_lab
	done
done

# Noise only: devices with no stripe, many runs, uncapped (they are fast).
noise() { # NAME DIR RUNS
	local false=0 n=0 wrong=
	for _ in $(seq "$3"); do
		read -r u c k o stop < <(IOPS=0 scan "$2")
		n=$((n + 1))
		[ "$u" != 0 ] && false=$((false + 1)) && wrong="$wrong $u"
	done
	printf 'noise   %-34s runs %3d  false inferences %d%s\n' "$1" "$n" "$false" "$([ -n "$wrong" ] && echo " ($wrong)")" | tee -a "$OUT"
}
if part noise; then
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
fi

# A misaligned partition (63 sectors, the seeds' 31.5 KiB) and an aligned
# one on the same RAID 10 4 × 64 KiB sas15k array: the random-read probe's
# mean latency penalty over the predicted split fraction, against the
# stripe-scan's straddle cost on the misaligned one and the lab's member
# model. (mkfs without lazy init: ext4lazyinit's background writes would
# queue on the members and inflate what a split read waits for.)
if part misaligned; then
LAB_DEV=$("$RAIDLAB" up --level raid10 --disks 4 --stripe-unit 64KiB --size 1GiB --preset sas15k --data-root "$DATA_ROOT" 2>/dev/null | tail -1)
CLEAN+=("$RAIDLAB down $LAB_DEV")
parted -s "$LAB_DEV" mklabel msdos mkpart primary 63s 400MiB mkpart primary 512MiB 100%
for _ in $(seq 50); do [ -b "${LAB_DEV}p2" ] && break; sleep 0.1; done
for p in 1 2; do
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${LAB_DEV}p$p"
	mkdir -p "$WORK/mis$p"
	mount "${LAB_DEV}p$p" "$WORK/mis$p"
	CLEAN+=("umount $WORK/mis$p")
done
IOPS=0 scan "$WORK/mis1" >/dev/null # writes the probe file: infers nothing
read -r u c k o stop < <(IOPS=0 scan "$WORK/mis1")
echo "misaligned (63s) raid10 4x64KiB sas15k: stripe-scan inferred $u, confidence $c, straddle cost ${k} µs" | tee -a "$OUT"
# Alternating chunks of 8 KiB random reads (the ordinary random-read probe,
# uncapped, QD 1) on the two partitions: per chunk its mean latency and the
# share of reads the lab counted split. The penalty is the mean of the
# paired chunk differences, with its standard error.
chunk() { # PART_DIR OPS → "<mean latency µs> <reads> <split reads>"
	local before after lat
	before=$("$RAIDLAB" stats "$LAB_DEV" --format json)
	lat=$("$AGENT" probe --dir "$1" --file-size 64MiB --fill-rate 0 --iops 0 --ops "$2" --format json 2>/dev/null |
		python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["latency_seconds"]["mean"]*1e6))')
	after=$("$RAIDLAB" stats "$LAB_DEV" --format json)
	python3 -c 'import json,sys; b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2]); print(sys.argv[3], a["read_requests"] - b["read_requests"], a["split_reads"] - b["split_reads"])' "$before" "$after" "$lat"
}
"$AGENT" probe --dir "$WORK/mis2" --file-size 64MiB --fill-rate 0 --iops 0 --ops 10 >/dev/null 2>&1
CHUNKS=()
for _ in 1 2 3 4; do
	CHUNKS+=("$(chunk "$WORK/mis1" $((MIS_OPS / 4)))" "$(chunk "$WORK/mis2" $((MIS_OPS / 4)))")
done
python3 - "$k" "${CHUNKS[@]}" <<'PY' | tee -a "$OUT"
import statistics, sys
scan = float(sys.argv[1])
rows = [tuple(map(float, r.split())) for r in sys.argv[2:]]
mis, al = rows[0::2], rows[1::2]
diffs = [m[0] - a[0] for m, a in zip(mis, al)]
pen = statistics.mean(diffs)
se = statistics.stdev(diffs) / len(diffs) ** 0.5
f_mis = sum(r[2] for r in mis) / sum(r[1] for r in mis)
f_al = sum(r[2] for r in al) / sum(r[1] for r in al)
predicted = 0.125  # internal/align: 8 KiB reads at a 31.5 KiB offset on a 64 KiB unit, beyond the aligned partition
# Lab member model (sas15k): an unsplit 8 KiB read takes 3.4 ms + U(0, 4 ms)
# + 8 KiB at 150 MB/s; a split one the slower of two members moving 4 KiB
# each: E[max of two U(0, 4 ms)] - E[U(0, 4 ms)] = 4/6 ms, less 4 KiB of transfer.
model = 4000 / 6 - 4096 / 150e6 * 1e6
print(f"random-read 8 KiB, {len(diffs)} alternating pairs of {int(mis[0][1])}-read chunks: misaligned mean {statistics.mean(m[0] for m in mis):.0f} µs "
      f"(lab counted {f_mis:.1%} split), aligned {statistics.mean(a[0] for a in al):.0f} µs ({f_al:.1%} split)")
print(f"penalty {pen:.0f} ± {se:.0f} µs per read; / predicted split fraction {predicted:.1%} = {pen / predicted:.0f} ± {se / predicted:.0f} µs per split read; "
      f"stripe-scan straddle cost {scan:.0f} µs; lab member model {model:.0f} µs")
PY
fi

if [ -n "$RESULTS" ]; then
	{
		echo
		echo "## $(date -u +%F) \`sudo bench/stripescan.sh\` (PARTS=\"$PARTS\" PRESETS=\"$PRESETS\" MAX_RUNS=$MAX_RUNS IOPS=$IOPS NOISE_RUNS=$NOISE_RUNS MIS_OPS=$MIS_OPS)"
		echo
		echo '```'
		cat "$OUT"
		echo '```'
	} >>"$RESULTS"
fi
