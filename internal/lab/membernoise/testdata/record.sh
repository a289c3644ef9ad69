#!/bin/sh
# Records real member noise (as root): four loop devices with direct I/O
# over files on this machine's disk, the same fio load on each (siblings
# doing the same work), phases cycling through random 8 KiB reads and
# writes, sequential 64 KiB writes, a trickle and a burst, while
# /proc/diskstats is sampled every second.
#   record.sh DIR SECONDS > noise.txt
# Output: one line a sample and device: unix_ns name and the 11 first
# /proc/diskstats fields after the name.
set -eu
dir=${1:-/var/tmp/memjudge-noise}
secs=${2:-1500}
mkdir -p "$dir"
devs=""
for i in 0 1 2 3; do
	f="$dir/member$i"
	[ -f "$f" ] || dd if=/dev/urandom of="$f" bs=1M count=512 status=none
	d=$(losetup --direct-io=on --show -f "$f")
	devs="$devs ${d#/dev/}"
done
cleanup() { for d in $devs; do losetup -d "/dev/$d" 2>/dev/null || true; done; }
trap cleanup EXIT
(
	end=$(( $(date +%s) + secs ))
	while [ "$(date +%s)" -lt "$end" ]; do
		for phase in "randrw --rwmixread=70 --bs=8k --iodepth=4 --rate_iops=300" \
			"randread --bs=8k --iodepth=8 --rate_iops=800" \
			"write --bs=64k --iodepth=2 --rate_iops=100" \
			"randrw --rwmixread=50 --bs=8k --iodepth=1 --rate_iops=20" \
			"randrw --rwmixread=60 --bs=16k --iodepth=16"; do
			jobs=""
			for d in $devs; do jobs="$jobs --name=$d --filename=/dev/$d"; done
			# shellcheck disable=SC2086
			fio --ioengine=libaio --direct=1 --time_based --runtime=60 --rw=$phase --group_reporting=0 \
				--output=/dev/null $jobs || true
		done
	done
) &
load=$!
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
	now=$(date +%s%N)
	for d in $devs; do
		awk -v n="$now" -v d="$d" '$3 == d { print n, d, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 }' /proc/diskstats
	done
	sleep 1
done
kill $load 2>/dev/null || true
wait 2>/dev/null || true
