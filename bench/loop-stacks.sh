#!/usr/bin/env bash
# Build (up) or tear down (down) the loop-device stacks that the
# real-device tests use, mounted under $PLUMBLINE_STACKS (default
# /tmp/plumbline-stacks), for benchmarks and the worked example of docs/alignment.md.
#
#   bench/loop-stacks.sh up     # prints the agent config that declares the arrays
#   bench/loop-stacks.sh down
set -euo pipefail
root=${PLUMBLINE_STACKS:-/tmp/plumbline-stacks}

# name  sector  label  start  fs    mkfs-args (':'-separated)        declared-raid
stacks=(
  "legacy63  512  msdos 63   ext4 -b:4096:-E:stride=16,stripe_width=32 raid10"
  "aligned64k 512 msdos 128  xfs  -d:su=64k,sw=2:-l:size=64m          raid10"
  "aligned1m 512  msdos 2048 ext4 -                                   -"
  "wronghint 512  gpt   2048 xfs  -d:su=32k,sw=4:-l:size=64m          raid10"
  "native4k  4096 gpt   256  xfs  -l:size=64m                         -"
)

up() {
  mkdir -p "$root"
  echo "declared_devices:" > "$root/agent.yml"
  echo "include:" > "$root/include.yml"
  echo "  mount_points:" >> "$root/include.yml"
  for s in "${stacks[@]}"; do
    read -r name sector label start fs args raid <<<"$s"
    img=$root/$name.img
    truncate -s 1G "$img"
    dev=$(losetup --find --show --sector-size "$sector" "$img")
    echo "$dev" > "$root/$name.dev"
    parted -s "$dev" mklabel "$label" 2>/dev/null
    end=-1s; [[ $label == gpt ]] && end=-34s
    parted -s "$dev" -- unit s mkpart primary "${start}s" "$end" 2>/dev/null
    partx -a "$dev" 2>/dev/null || true
    if [[ $args == - ]]; then args=(); else IFS=: read -ra args <<<"$args"; fi
    case $fs in
      ext4) mkfs.ext4 -q -F "${args[@]}" "${dev}p1" ;;
      xfs) mkfs.xfs -q -f "${args[@]}" "${dev}p1" ;;
    esac
    mkdir -p "$root/mnt/$name"
    mount "${dev}p1" "$root/mnt/$name"
    echo "    - $root/mnt/$name" >> "$root/include.yml"
    if [[ $raid == raid10 ]]; then
      printf '  - device: %s\n    raid: {level: raid10, stripe_unit: 64KiB, disks: 4}\n' "$dev" >> "$root/agent.yml"
    fi
  done
  cat "$root/include.yml" >> "$root/agent.yml"
  echo "$root/agent.yml"
}

down() {
  for s in "${stacks[@]}"; do
    read -r name _ <<<"$s"
    umount "$root/mnt/$name" 2>/dev/null || true
    if [[ -f $root/$name.dev ]]; then
      dev=$(cat "$root/$name.dev")
      partx -d "$dev" 2>/dev/null || true
      losetup -d "$dev" 2>/dev/null || true
    fi
  done
  rm -rf "$root"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
