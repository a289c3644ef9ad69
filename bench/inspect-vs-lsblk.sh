#!/usr/bin/env bash
# Wall time of `agent inspect` beside `lsblk -t -J` on this machine, with
# the real-device loop stacks mounted (bench/loop-stacks.sh). Runs both
# N times (default 200), interleaved, and prints the median and p90 of each
# and the ratio. Target: agent inspect ≤ 3× lsblk.
#
#   sudo bench/inspect-vs-lsblk.sh          # N=200
#   N=50 sudo bench/inspect-vs-lsblk.sh
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-200}

go build -o bin/agent ./cmd/agent
cfg=$(bench/loop-stacks.sh up)
trap 'bench/loop-stacks.sh down' EXIT

# One untimed run of each warms the page cache and the binaries.
./bin/agent inspect --config "$cfg" --format json >/dev/null
lsblk -t -J >/dev/null

declare -a a l
for ((i = 0; i < n; i++)); do
  t0=$(date +%s%N); ./bin/agent inspect --config "$cfg" --format json >/dev/null; t1=$(date +%s%N)
  lsblk -t -J >/dev/null; t2=$(date +%s%N)
  a+=($(((t1 - t0) / 1000))); l+=($(((t2 - t1) / 1000)))
done

stat() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {printf "%.2f %.2f", v[int(NR*0.5)+1]/1000, v[int(NR*0.9)+1]/1000}'; }
read -r am a90 <<<"$(stat "${a[@]}")"
read -r lm l90 <<<"$(stat "${l[@]}")"
vols=$(./bin/agent inspect --config "$cfg" --format json | grep -c '"mount_point"')
printf 'volumes inspected: %s (loop stacks), block devices: %s\n' "$vols" "$(ls /sys/block | wc -l)"
printf '%-28s median %7s ms   p90 %7s ms\n' "agent inspect --format json" "$am" "$a90"
printf '%-28s median %7s ms   p90 %7s ms\n' "lsblk -t -J" "$lm" "$l90"
awk -v a="$am" -v l="$lm" 'BEGIN {printf "ratio (median): %.2fx (target <= 3x)\n", a / l}'
