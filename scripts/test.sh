#!/usr/bin/env bash
# The whole test suite: static checks, the Windows build, generated-code
# freshness, and every Go test including the real-device ones (loop
# devices, real file systems, fio, lsblk).
#
# It installs what it needs (Debian packages) when it can. What it cannot
# install is named, and the tests that need it skip — except under CI=true,
# where nothing may skip: a missing tool or a non-root run fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=${CI:-false}
say() { printf '==> %s\n' "$*"; }
missing=()

# Debian packages the tests use, by the command that shows they are there.
declare -A pkg_for=(
  [parted]=parted [partx]=util-linux [losetup]=util-linux [lsblk]=util-linux
  [mkfs.ext4]=e2fsprogs [mkfs.xfs]=xfsprogs [fio]=fio
  [protoc]=protobuf-compiler [xz]=xz-utils [runuser]=util-linux
  [systemd-analyze]=systemd
  [promtool]=prometheus [prometheus]=prometheus [amtool]=prometheus-alertmanager
  # The Windows smoke test (deploy/windows/wine): agent.exe under Wine, and
  # mingw-w64 for its stand-in bcryptprimitives.dll.
  [wine]=wine [x86_64-w64-mingw32-gcc]=gcc-mingw-w64-x86-64
  # The packages test (deploy/packaging): dpkg installs the .deb, rpm reads
  # the .rpm.
  [dpkg]=dpkg [rpm]=rpm [make]=make
  # The fleet in a box (bench/fleetbox): Debian hosts booted with
  # systemd-nspawn from a debootstrap root; its checks query with curl, jq.
  [debootstrap]=debootstrap [systemd-nspawn]=systemd-container [jq]=jq [curl]=curl
  # The agent's database sources (internal/agent/dbio): a private MariaDB
  # with performance_schema, started in a temporary directory.
  [mariadb-install-db]=mariadb-server
)
need=()
for cmd in "${!pkg_for[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("${pkg_for[$cmd]}")
done
[[ -f /usr/include/google/protobuf/timestamp.proto ]] || need+=(libprotobuf-dev)
# wine runs 64-bit programs with wine64 (not on PATH); without recommends,
# name it.
[[ -x /usr/lib/wine/wine64 ]] || need+=(wine64)
# The store tests start a throwaway PostgreSQL from Debian's server binaries
# (or use PLUMBLINE_TEST_POSTGRES_DSN when set).
if [[ -z ${PLUMBLINE_TEST_POSTGRES_DSN:-} ]] && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  need+=(postgresql)
fi
if ((${#need[@]})); then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "installing Debian packages: ${need[*]}"
    # Waits for apt's locks (a fresh VM's boot-time updates) rather than failing.
    ./scripts/apt-install.sh "${need[@]}"
  else
    missing+=("Debian packages ${need[*]} (not root or no apt-get)")
  fi
fi
[[ $(id -u) == 0 ]] || missing+=("root (real loop-device tests)")
# The RAID lab (internal/lab/raidlab, cmd/raidlab, bench/seeds) serves its arrays
# through FUSE, mounted with mount(2) directly (no fusermount, no fuse3
# package): it needs only the kernel's /dev/fuse.
[[ -c /dev/fuse ]] || missing+=("/dev/fuse (RAID lab tests; load the fuse module)")

if ((${#missing[@]})); then
  if [[ $ci == true ]]; then
    printf 'test.sh: CI=true and these are missing: %s\n' "${missing[@]}" >&2
    exit 1
  fi
  for m in "${missing[@]}"; do say "SKIPPING what needs: $m"; done
fi

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$') 2>/dev/null || true)
if [[ -n $unformatted ]]; then
  printf 'gofmt would change:\n%s\n' "$unformatted" >&2
  exit 1
fi

say "go vet (linux, windows)"
go vet ./...
GOOS=windows go vet ./...

say "build (linux, windows)"
go build ./...
GOOS=windows go build ./...

if command -v protoc >/dev/null; then
  say "generated protobuf code is current"
  ./scripts/proto.sh --check
elif [[ $ci == true ]]; then
  echo "test.sh: protoc missing under CI=true" >&2
  exit 1
fi

say "go test (unit, fuzz seeds, real devices)"
# -p 1 keeps real-device tests of different packages from competing for the
# machine's two cores and loop devices; each package still runs its own
# tests in parallel where they say so.
go test -count=1 -p 1 -timeout 30m ./...
