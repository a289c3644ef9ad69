#!/usr/bin/env bash
# Install Debian packages, waiting for apt's locks instead of failing at
# once: fresh cloud VMs run apt at boot (unattended-upgrades, cloud-init),
# and `make test` started meanwhile must queue behind it.
#
#   scripts/apt-install.sh PKG...
#   APT_LOCK_TIMEOUT=600   seconds to wait for a lock (default 600)
#
# apt-get install waits by itself with -o DPkg::Lock::Timeout; apt-get
# update does not (apt 2.6 fails at once on /var/lib/apt/lists/lock), so
# update is retried while the failure is a held lock, until the timeout.
set -euo pipefail
timeout=${APT_LOCK_TIMEOUT:-600}
export DEBIAN_FRONTEND=noninteractive

deadline=$((SECONDS + timeout))
said=
while :; do
  if out=$(apt-get -o DPkg::Lock::Timeout="$timeout" update -qq 2>&1); then
    break
  fi
  if ! grep -q 'Could not get lock' <<<"$out" || ((SECONDS >= deadline)); then
    printf '%s\n' "$out" >&2
    ((SECONDS >= deadline)) && echo "apt-install: apt's lists lock still held after ${timeout}s (APT_LOCK_TIMEOUT)" >&2
    exit 1
  fi
  if [[ -z $said ]]; then
    printf 'apt-install: waiting up to %ss for apt: %s\n' "$timeout" "$(grep -m1 'Could not get lock' <<<"$out")" >&2
    said=1
  fi
  sleep 2
done
apt-get -o DPkg::Lock::Timeout="$timeout" install -y -qq --no-install-recommends "$@" >/dev/null
