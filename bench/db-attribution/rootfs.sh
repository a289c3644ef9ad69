#!/usr/bin/env bash
# bench/db-attribution/rootfs.sh CACHE_DIR: a Debian trixie root with
# PostgreSQL 17 (pg_stat_io), made once with debootstrap and kept as
# CACHE_DIR/trixie-pg17.tar (reruns only unpack it). Prints the tarball's
# path. The bench runs postgres from it under chroot, data directory on a
# lab array bind-mounted into the root.
#   DBBENCH_MIRROR  the Debian mirror (default: http://deb.debian.org/debian)
set -euo pipefail
cache=${1:?usage: rootfs.sh CACHE_DIR}
tarball=$cache/trixie-pg17.tar
if [[ -s $tarball ]]; then
  echo "$tarball"
  exit 0
fi
mirror=${DBBENCH_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
root=$tmp/root
unmount_all() { { findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | xargs -r -n1 umount -l; } || true; }
trap 'unmount_all; rm -rf --one-file-system "$tmp"' EXIT
debootstrap --variant=minbase trixie "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
  { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
# No service starts inside the root while packages install; no main
# cluster is created (the bench runs initdb on the lab array itself).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
mkdir -p "$root/etc/postgresql-common"
echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
mount -t proc proc "$root/proc"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  sh -c 'apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-17 postgresql-client-17' \
  >>"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
umount "$root/proc"
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/archives/"*.deb
[[ -x $root/usr/lib/postgresql/17/bin/postgres ]] || { echo "rootfs.sh: no postgres 17 in the root" >&2; exit 1; }
unmount_all
tar --one-file-system -C "$root" -cf "$tarball.part" .
mv "$tarball.part" "$tarball"
echo "$tarball"
