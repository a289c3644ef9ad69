#!/usr/bin/env bash
# probe-vs-fio.sh — fidelity, cost and disturbance of `agent probe` measured
# against fio, on the SAME file with the same parameters, interleaved rounds.
#
#   sudo bench/probe-vs-fio.sh            # ~5-8 minutes with the defaults
#   ROUNDS=5 OPS=2000 bench/probe-vs-fio.sh
#
# Needs: go, fio, jq. CPU and peak RSS come from wait4's rusage through
# bench/rusage (microsecond CPU; GNU time's 10 ms steps are too coarse). Uses a directory on a real
# disk (not tmpfs): BENCH_DIR, default /var/tmp/plumbline-bench. The probe
# file is created once by `agent probe` (its 1 MiB header is skipped by fio
# with --offset=1M); fio's foreground file for the disturbance test lives
# beside it. Everything is removed at the end unless KEEP=1.
#
# Env (defaults): ROUNDS=3 OPS=1000 PACED_IOPS=100 SAT_OPS=20000 LOG_OPS=500
#   FILE_SIZE_MIB=1024 FG_SECS=10 FG_SIZE_MIB=1024 BENCH_DIR AGENT (prebuilt binary)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
OPS=${OPS:-1000}
PACED_IOPS=${PACED_IOPS:-100}
SAT_OPS=${SAT_OPS:-20000}
LOG_OPS=${LOG_OPS:-500}
FILE_SIZE_MIB=${FILE_SIZE_MIB:-1024}
FG_SECS=${FG_SECS:-10}
FG_SIZE_MIB=${FG_SIZE_MIB:-1024}
BENCH_DIR=${BENCH_DIR:-/var/tmp/plumbline-bench}
KEEP=${KEEP:-0}

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for tool in fio jq go; do
	command -v "$tool" >/dev/null || { echo "probe-vs-fio: needs $tool" >&2; exit 1; }
done
if [[ -z "${AGENT:-}" ]]; then
	AGENT=$work/agent
	(cd "$repo" && go build -o "$AGENT" ./cmd/agent)
fi
RUSAGE=$work/rusage
(cd "$repo" && go build -o "$RUSAGE" ./bench/rusage)
mkdir -p "$BENCH_DIR"
fstype=$(stat -f -c %T "$BENCH_DIR")
if [[ $fstype == tmpfs || $fstype == ramfs ]]; then
	echo "probe-vs-fio: $BENCH_DIR is on $fstype; use a directory on a real disk" >&2
	exit 1
fi
FILE=$BENCH_DIR/.plumbline-probe
FILE_SIZE=$((FILE_SIZE_MIB << 20))
DATA_SIZE=$((FILE_SIZE - (1 << 20)))

# Same file, same shape for both tools. Fidelity runs turn the agent's busy
# and latency guards off (fio has none); the free-space floor is lowered so
# the bench runs on small disks.
agent_common=(--dir "$BENCH_DIR" --file-size "${FILE_SIZE_MIB}MiB" --min-free 0 --min-free-percent 1
	--busy-threshold 0 --latency-ceiling 0 --format json)
fio_common=(--filename="$FILE" --offset=1M --size="$DATA_SIZE" --bs=8k --direct=1 --ioengine=psync
	--iodepth=1 --norandommap --randrepeat=0 --percentile_list=50:90:99:99.9 --output-format=json)

log() { printf '%s\n' "$*" >&2; }
median() { sort -g | awk '{a[NR]=$1} END{if(NR==0){print "nan"; exit} if(NR%2){print a[(NR+1)/2]} else {printf "%.9g\n", (a[NR/2]+a[NR/2+1])/2}}'; }
minmax() { sort -g | awk 'NR==1{mn=$1} {mx=$1} END{printf "%.6g..%.6g", mn, mx}'; }
# minmax_us: the same for values in seconds, shown in µs.
minmax_us() { awk '{printf "%.1f\n", $1*1e6}' | minmax; }
# paired A_CMD B_CMD: the median and range of the per-round ratios a_i/b_i
# (rounds are interleaved, so pairing cancels slow drift in the machine).
paired() { paste -d' ' <(eval "$1") <(eval "$2") | awk '$2 > 0 {printf "%.4f\n", $1/$2}' | { v=$(cat); printf '%s [%s]' "$(echo "$v" | median)" "$(echo "$v" | minmax)"; }; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b == 0) print "nan"; else printf "%.3f", a/b }'; }
# paired A_CMD B_CMD: the median and range of the per-round ratios a_i/b_i
# (rounds are interleaved, so pairing cancels slow drift in the machine).
paired() { paste -d' ' <(eval "$1") <(eval "$2") | awk '$2 > 0 {printf "%.4f\n", $1/$2}' | { v=$(cat); printf '%s [%s]' "$(echo "$v" | median)" "$(echo "$v" | minmax)"; }; }
us() { awk -v s="$1" 'BEGIN{printf "%.1f", s*1e6}'; }

# run_agent NAME ARGS...: one agent run under rusage; appends the JSON to
# $work/NAME.agent and "cpu_seconds ops max_rss_kib" to $work/NAME.cost.
run_agent() {
	local name=$1; shift
	"$RUSAGE" -o "$work/time" "$AGENT" probe "${agent_common[@]}" "$@" >"$work/out.json"
	jq -c . "$work/out.json" >>"$work/$name.agent"
	read -r cpu m <"$work/time"
	echo "$cpu $(jq .ops "$work/out.json") $m" >>"$work/$name.cost"
}
# run_fio NAME ARGS...: one fio run, JSON appended to $work/NAME.fio.
run_fio() {
	local name=$1; shift
	fio --name="$name" "${fio_common[@]}" "$@" | jq -c . >>"$work/$name.fio"
}

log "== setup: load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $BENCH_DIR on $fstype ($(df -h --output=source "$BENCH_DIR" | tail -1))"
# Create and fill the probe file once (unpaced) so every round reuses it.
"$AGENT" probe "${agent_common[@]}" --fill-rate 0 --ops 1 >/dev/null

start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
	log "== round $r/$ROUNDS"
	# Alternate who goes first, so drift does not favour one tool.
	order=(agent fio); ((r % 2 == 0)) && order=(fio agent)
	for who in "${order[@]}"; do
		if [[ $who == agent ]]; then
			run_agent paced --kind random-read --block-size 8KiB --ops "$OPS" --iops "$PACED_IOPS"
			run_agent sat --kind random-read --block-size 8KiB --ops "$SAT_OPS" --iops 0
			run_agent fdatasync --kind log-write --block-size 8KiB --sync fdatasync --ops "$LOG_OPS" --iops 0
			run_agent dsync --kind log-write --block-size 8KiB --sync dsync --ops "$LOG_OPS" --iops 0
		else
			run_fio paced --rw=randread --number_ios="$OPS" --rate_iops="$PACED_IOPS"
			run_fio sat --rw=randread --number_ios="$SAT_OPS"
			run_fio fdatasync --rw=write --fdatasync=1 --number_ios="$LOG_OPS"
			run_fio dsync --rw=write --sync=dsync --number_ios="$LOG_OPS"
		fi
	done
done

# --- disturbance: foreground fio randread QD8, alone vs beside a default probe
FG=$BENCH_DIR/foreground.fio
fg_args=(--name=fg --filename="$FG" --size="${FG_SIZE_MIB}M" --bs=8k --rw=randread --direct=1 --ioengine=libaio
	--iodepth=8 --time_based --runtime="$FG_SECS" --randrepeat=0 --norandommap --percentile_list=99 --output-format=json)
log "== disturbance: laying out $FG"
fio --name=layout --filename="$FG" --size="${FG_SIZE_MIB}M" --rw=write --bs=1M --direct=1 --output-format=json >/dev/null
for r in $(seq 1 "$ROUNDS"); do
	log "== disturbance round $r/$ROUNDS"
	order=(alone beside); ((r % 2 == 0)) && order=(beside alone)
	for cond in "${order[@]}"; do
		if [[ $cond == alone ]]; then
			fio "${fg_args[@]}" | jq -c . >>"$work/fg-alone.fio"
		else
			# A default probe (100 IOPS, 1000 ops ≈ 10 s) with the busy guard
			# OFF: with it on, the probe skips beside a saturating foreground
			# (stopped_reason "busy") and disturbs nothing; this measures the
			# worst case, the probe's own I/O.
			"$AGENT" probe --dir "$BENCH_DIR" --file-size "${FILE_SIZE_MIB}MiB" --min-free 0 --min-free-percent 1 \
				--busy-threshold 0 --busy-window 10ms --format json >"$work/beside.json" &
			pid=$!
			fio "${fg_args[@]}" | jq -c . >>"$work/fg-beside.fio"
			wait "$pid"
			jq -c . "$work/beside.json" >>"$work/beside.agent"
		fi
	done
done
# One guarded run beside the foreground, to show the guard's verdict.
fio "${fg_args[@]}" --runtime=4 >/dev/null &
fpid=$!
sleep 1
guarded=$("$AGENT" probe --dir "$BENCH_DIR" --file-size "${FILE_SIZE_MIB}MiB" --min-free 0 --min-free-percent 1 --format json --ops 100 | jq -c '{stopped_reason, skipped, busy_percent, device}')
wait "$fpid"
elapsed=$(($(date +%s) - start))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- report
fio_pct() { jq -r ".jobs[0].$1.clat_ns.percentile[\"$2\"] / 1e9" "$work/$3.fio"; }
agent_field() { jq -r ".$1" "$work/$2.agent"; }

echo "# probe-vs-fio results"
echo
echo "rounds=$ROUNDS ops=$OPS paced_iops=$PACED_IOPS sat_ops=$SAT_OPS log_ops=$LOG_OPS file=${FILE_SIZE_MIB}MiB fg=${FG_SECS}s; took ${elapsed}s"
echo "host: $(nproc) CPUs, $(uname -r), fio $(fio --version | sed 's/fio-//'), $BENCH_DIR on $fstype"
echo "load average before: $load_before, after: $load_after"
echo
echo "## Fidelity (medians over $ROUNDS rounds; [min..max])"
echo
echo "| measure | agent probe | fio | ratio of medians | median per-round ratio [range] | target |"
echo "|---|---|---|---|---|---|"
a=$(agent_field latency_seconds.p50 paced | median); f=$(fio_pct read 50.000000 paced | median)
echo "| paced 8KiB randread ${PACED_IOPS} IOPS p50 (µs) | $(us "$a") [$(agent_field latency_seconds.p50 paced | minmax_us)] | $(us "$f") [$(fio_pct read 50.000000 paced | minmax_us)] | $(ratio "$a" "$f") | $(paired "agent_field latency_seconds.p50 paced" "fio_pct read 50.000000 paced") | 0.90–1.10 |"
a=$(agent_field latency_seconds.p99 paced | median); f=$(fio_pct read 99.000000 paced | median)
echo "| paced 8KiB randread ${PACED_IOPS} IOPS p99 (µs) | $(us "$a") [$(agent_field latency_seconds.p99 paced | minmax_us)] | $(us "$f") [$(fio_pct read 99.000000 paced | minmax_us)] | $(ratio "$a" "$f") | $(paired "agent_field latency_seconds.p99 paced" "fio_pct read 99.000000 paced") | 0.75–1.25 |"
a=$(agent_field iops paced | median); f=$(jq -r '.jobs[0].read.iops' "$work/paced.fio" | median)
echo "| paced achieved IOPS | $(printf %.1f "$a") | $(printf %.1f "$f") | $(ratio "$a" "$f") | | |"
a=$(agent_field iops sat | median); f=$(jq -r '.jobs[0].read.iops' "$work/sat.fio" | median)
echo "| saturated QD1 O_DIRECT randread IOPS | $(printf %.0f "$a") [$(agent_field iops sat | minmax)] | $(printf %.0f "$f") [$(jq -r '.jobs[0].read.iops' "$work/sat.fio" | minmax)] | $(ratio "$a" "$f") | $(paired "agent_field iops sat" "jq -r '.jobs[0].read.iops' $work/sat.fio") | ≥ 0.95 |"
a=$(agent_field latency_seconds.p50 sat | median); f=$(fio_pct read 50.000000 sat | median)
echo "| saturated p50 (µs) | $(us "$a") | $(us "$f") | $(ratio "$a" "$f") | $(paired "agent_field latency_seconds.p50 sat" "fio_pct read 50.000000 sat") | |"
for mode in fdatasync dsync; do
	a=$(agent_field latency_seconds.p50 $mode | median)
	if [[ $mode == fdatasync ]]; then
		# fio splits write and fdatasync latency; per-op p50 ≈ sum of the two p50s.
		f=$(jq -r '(.jobs[0].write.clat_ns.percentile["50.000000"] + .jobs[0].sync.lat_ns.percentile["50.000000"]) / 1e9' "$work/$mode.fio" | median)
		fr=$(jq -r '(.jobs[0].write.clat_ns.percentile["50.000000"] + .jobs[0].sync.lat_ns.percentile["50.000000"]) / 1e9' "$work/$mode.fio" | minmax_us)
		note="fio: write clat p50 + sync p50"
		fcmd="jq -r '(.jobs[0].write.clat_ns.percentile[\"50.000000\"] + .jobs[0].sync.lat_ns.percentile[\"50.000000\"]) / 1e9' $work/$mode.fio"
	else
		f=$(fio_pct write 50.000000 $mode | median); fr=$(fio_pct write 50.000000 $mode | minmax_us)
		note="fio --sync=dsync write clat p50"
		fcmd="fio_pct write 50.000000 $mode"
	fi
	echo "| 8KiB log-write $mode p50 (µs) | $(us "$a") [$(agent_field latency_seconds.p50 $mode | minmax_us)] | $(us "$f") [$fr] | $(ratio "$a" "$f") | $(paired "agent_field latency_seconds.p50 $mode" "$fcmd") | report ($note) |"
	a=$(agent_field iops $mode | median); f=$(jq -r '.jobs[0].write.iops' "$work/$mode.fio" | median)
	echo "| 8KiB log-write $mode IOPS | $(printf %.0f "$a") [$(agent_field iops $mode | minmax)] | $(printf %.0f "$f") [$(jq -r '.jobs[0].write.iops' "$work/$mode.fio" | minmax)] | $(ratio "$a" "$f") | $(paired "agent_field iops $mode" "jq -r '.jobs[0].write.iops' $work/$mode.fio") | |"
done
echo
echo "## Cost of agent probe (wait4 rusage: user+sys CPU of the whole process incl. start-up and the JSON output; peak RSS)"
echo
echo "| run | CPU ms per 1000 ops (median [min..max]) | peak RSS MiB (max) | target |"
echo "|---|---|---|---|"
for name in sat paced fdatasync dsync; do
	cpu=$(awk '{printf "%.2f\n", $1/$2*1000*1000}' "$work/$name.cost")
	rss=$(awk '{print $3}' "$work/$name.cost" | sort -n | tail -1)
	tgt=""; [[ $name == sat ]] && tgt="≤ 30 ms CPU, ≤ 20 MiB RSS"
	echo "| $name | $(echo "$cpu" | median) [$(echo "$cpu" | minmax)] | $(awk -v k="$rss" 'BEGIN{printf "%.1f", k/1024}') | $tgt |"
done
echo
echo "## Disturbance: foreground fio 8KiB randread QD8 (${FG_SECS}s), alone vs beside a default probe (100 IOPS, busy guard off)"
echo
ai=$(jq -r '.jobs[0].read.iops' "$work/fg-alone.fio" | median); bi=$(jq -r '.jobs[0].read.iops' "$work/fg-beside.fio" | median)
ap=$(jq -r '.jobs[0].read.clat_ns.percentile["99.000000"]/1e9' "$work/fg-alone.fio" | median)
bp=$(jq -r '.jobs[0].read.clat_ns.percentile["99.000000"]/1e9' "$work/fg-beside.fio" | median)
echo "| foreground | alone | beside probe | change of medians | median per-round beside/alone [range] |"
echo "|---|---|---|---|---|"
echo "| IOPS median [min..max] | $(printf %.0f "$ai") [$(jq -r '.jobs[0].read.iops' "$work/fg-alone.fio" | minmax)] | $(printf %.0f "$bi") [$(jq -r '.jobs[0].read.iops' "$work/fg-beside.fio" | minmax)] | $(awk -v a="$ai" -v b="$bi" 'BEGIN{printf "%+.2f%%", (b-a)/a*100}') | $(paired "jq -r '.jobs[0].read.iops' $work/fg-beside.fio" "jq -r '.jobs[0].read.iops' $work/fg-alone.fio") |"
echo "| p99 µs median [min..max] | $(us "$ap") [$(jq -r '.jobs[0].read.clat_ns.percentile["99.000000"]/1e3' "$work/fg-alone.fio" | minmax)] | $(us "$bp") [$(jq -r '.jobs[0].read.clat_ns.percentile["99.000000"]/1e3' "$work/fg-beside.fio" | minmax)] | $(awk -v a="$ap" -v b="$bp" 'BEGIN{printf "%+.2f%%", (b-a)/a*100}') | $(paired "jq -r '.jobs[0].read.clat_ns.percentile[\"99.000000\"]' $work/fg-beside.fio" "jq -r '.jobs[0].read.clat_ns.percentile[\"99.000000\"]' $work/fg-alone.fio") |"
echo
echo "probe beside the foreground: ops $(jq -r .ops "$work/beside.agent" | tr '\n' ' '), p50 µs $(jq -r '.latency_seconds.p50*1e6|floor' "$work/beside.agent" | tr '\n' ' ')"
echo "default (guarded) probe beside a running foreground: $guarded"

echo
echo "## Raw values per round (agent | fio), µs unless noted"
echo
echo '```'
paste -d' ' <(agent_field latency_seconds.p50 paced) <(fio_pct read 50.000000 paced) | awk '{printf "paced p50     %8.1f | %8.1f\n", $1*1e6, $2*1e6}'
paste -d' ' <(agent_field latency_seconds.p99 paced) <(fio_pct read 99.000000 paced) | awk '{printf "paced p99     %8.1f | %8.1f\n", $1*1e6, $2*1e6}'
paste -d' ' <(agent_field iops sat) <(jq -r '.jobs[0].read.iops' "$work/sat.fio") | awk '{printf "sat IOPS      %8.0f | %8.0f\n", $1, $2}'
paste -d' ' <(agent_field latency_seconds.p50 fdatasync) <(jq -r '(.jobs[0].write.clat_ns.percentile["50.000000"] + .jobs[0].sync.lat_ns.percentile["50.000000"]) / 1e9' "$work/fdatasync.fio") | awk '{printf "fdatasync p50 %8.1f | %8.1f\n", $1*1e6, $2*1e6}'
paste -d' ' <(agent_field latency_seconds.p50 dsync) <(fio_pct write 50.000000 dsync) | awk '{printf "dsync p50     %8.1f | %8.1f\n", $1*1e6, $2*1e6}'
echo '```'

if [[ $KEEP != 1 ]]; then
	"$AGENT" probe --cleanup --dir "$BENCH_DIR" >/dev/null
	rm -f "$FG"
	rmdir "$BENCH_DIR" 2>/dev/null || true
fi
