#!/usr/bin/env bash
# bench/fleetbox/rootfs.sh CACHE_DIR: a Debian bookworm root file system
# for the fleet in a box, made once with debootstrap and kept as
# CACHE_DIR/bookworm.tar (reruns only unpack it). Prints the tarball's path.
#   FLEETBOX_MIRROR  the Debian mirror (default: http://deb.debian.org/debian)
set -euo pipefail
cache=${1:?usage: rootfs.sh CACHE_DIR}
tarball=$cache/bookworm.tar
if [[ -s $tarball ]]; then
  echo "$tarball"
  exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
# debootstrap mounts /proc and /sys in the target while it works: never
# follow a mount left behind when archiving or removing.
unmount_all() { { findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | xargs -r -n1 umount -l; } || true; }
trap 'unmount_all; rm -rf --one-file-system "$tmp"' EXIT
# minbase plus systemd as init and dbus (machinectl, systemctl in the
# container); everything else the packages need is in the base.
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,ca-certificates \
  bookworm "$tmp/root" "${FLEETBOX_MIRROR:-http://deb.debian.org/debian}" >"$tmp/debootstrap.log" 2>&1 ||
  { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
# A host name file is written per container; no getty on a console nobody
# reads; the apt lists are not needed (packages install from files).
rm -f "$tmp/root/etc/hostname"
rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/archives/"*.deb
unmount_all
tar --one-file-system -C "$tmp/root" -cf "$tarball.part" .
mv "$tarball.part" "$tarball"
echo "$tarball"
