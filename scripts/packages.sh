#!/usr/bin/env bash
# make packages: the .deb and .rpm of plumbline-agent and plumbline-server
# for each of ARCHS, and the Windows agent's zip, under DIST (default dist/).
#
#   VERSION   package version and what `agent version` prints (default: the
#             latest v* tag, v1.2.3-rc1 → 1.2.3~rc1, N commits after it
#             +N.g<commit>; without a tag 0.0.0~git<date>.<commit>)
#   ARCHS     Linux architectures (default: amd64 arm64)
#   DIST      output directory (default: dist)
#   FORMATS   what to make of deb rpm zip (default: all three; the fleet
#             in a box makes only deb)
#   SOURCE_DATE_EPOCH  the time in every archive (default: the commit's)
#
# nfpm is pinned in tools/go.mod (built on the first run, like buf). The
# binaries are static (CGO_ENABLED=0) and built with -trimpath; with the
# same commit, VERSION and SOURCE_DATE_EPOCH the packages are the same bytes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
go=${GO:-go}

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
default_version() {
  local d
  if d=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
    # v1.2.3-rc1-4-gabcdef: tag v1.2.3-rc1, 4 commits after it.
    local n=${d%-g*}
    local hash=${d##*-g} tag=${n%-*}
    n=${n##*-}
    tag=${tag#v}
    tag=${tag//-/\~} # 1.2.3~rc1 sorts before 1.2.3 in dpkg and rpm
    if ((n == 0)); then echo "$tag"; else echo "$tag+$n.g$hash"; fi
    return
  fi
  echo "0.0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d).$(git rev-parse --short=12 HEAD)"
}
export VERSION=${VERSION:-$(default_version)}
# The commit, for plumbline_build_info's revision label (the builds below
# leave VCS stamping off, for the same bytes from the same commit).
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ ! $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
  echo "packages.sh: VERSION $VERSION: want a digit first, then letters, digits, . + ~" >&2
  exit 2
fi
archs=${ARCHS:-amd64 arm64}
formats=" ${FORMATS:-deb rpm zip} "
dist=${DIST:-dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
stage=$dist/.stage
rm -rf "$stage"
mkdir -p "$stage"

say() { printf '==> %s\n' "$*"; }
build() { # GOOS GOARCH OUT PKG
  CGO_ENABLED=0 GOOS=$1 GOARCH=$2 "$go" build -trimpath -buildvcs=false \
    -ldflags "-s -w -X main.version=$VERSION -X github.com/prometheus/common/version.Revision=$REVISION" -o "$3" "$4"
}

say "nfpm (tools/go.mod)"
"$go" -C tools build -o "$stage/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm

# One staging directory per package and architecture, laid out as
# deploy/packaging/*.nfpm.yaml expect. The units are the ones in
# deploy/systemd with the packaged binary paths (/usr/bin). The config in
# /etc is the safe minimal one of deploy/packaging/etc (nothing invented is
# active); the annotated example of deploy/examples goes to
# /usr/share/doc/PKG/examples, with the packaged spool path (the unit's
# StateDirectory=). Debian's copyright (DEP-5), changelog.Debian.gz and
# the man page (made from the binary's own --help) are made here too.
maintainer=$(sed -n "s/^maintainer: //p" deploy/packaging/agent.nfpm.yaml)
stage_docs() { # PROG DIR
  local prog=$1 dir=$2 pkg=plumbline-$1
  sed "s#@PKG@#$pkg#g" deploy/packaging/copyright >"$dir/copyright"
  printf '%s (%s-1) unstable; urgency=medium\n\n  * Upstream release %s.\n\n -- %s  %s\n' \
    "$pkg" "$VERSION" "$VERSION" "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")" |
    gzip -9n >"$dir/changelog.Debian.gz"
  gzip -9nc "$stage/man/$pkg.8" >"$dir/$pkg.8.gz"
  sed -e "s#@PKG@#$pkg#g" -e "s#@PROG@#$prog#g" deploy/packaging/lintian-overrides >"$dir/lintian-overrides"
}
stage_pkg() { # PROG ARCH STATE_DIR STATE_MODE ETC_DIRS
  local prog=$1 arch=$2 dir=$stage/$1-$2
  mkdir -p "$dir"
  [[ -x $dir/plumbline-$prog ]] || build linux "$arch" "$dir/plumbline-$prog" "./cmd/$prog"
  sed "s#/usr/local/bin/plumbline-#/usr/bin/plumbline-#g" "deploy/systemd/plumbline-$prog.service" >"$dir/plumbline-$prog.service"
  cp "deploy/packaging/etc/$prog.yaml" "$dir/$prog.yaml"
  sed "s#^  dir: /var/lib/plumbline/spool#  dir: /var/lib/plumbline-agent/spool#" "deploy/examples/$prog.yaml" >"$dir/$prog.example.yaml"
  cp LICENSE "$dir/"
  stage_docs "$prog" "$dir"
  for s in preinstall postinstall preremove postremove; do
    sed -e "s#@PKG@#plumbline-$prog#g" -e "s#@STATE_DIR@#$3#g" -e "s#@STATE_MODE@#$4#g" -e "s#@ETC_DIRS@#$5#g" \
      "deploy/packaging/scripts/$s.sh" >"$dir/$s.sh"
  done
  for packager in deb rpm; do
    [[ $formats == *" $packager "* ]] || continue
    (cd "$dir" && ARCH=$arch "$stage/nfpm" package --config "$root/deploy/packaging/$prog.nfpm.yaml" \
      --packager "$packager" --target "$dist/" >/dev/null)
  done
}

# The man pages, from binaries for this machine (the help text is the same
# on every architecture).
say "man pages (deploy/packaging/manpage)"
mkdir -p "$stage/man" "$stage/host"
"$go" build -trimpath -buildvcs=false -o "$stage/host/" ./deploy/packaging/manpage
# A Linux machine of one of ARCHS builds those binaries once, for both.
host_arch=$("$go" env GOARCH)
if [[ $("$go" env GOOS) == linux && " $archs " == *" $host_arch "* ]]; then
  for prog in agent server; do
    mkdir -p "$stage/$prog-$host_arch"
    build linux "$host_arch" "$stage/$prog-$host_arch/plumbline-$prog" "./cmd/$prog"
    ln -s "../$prog-$host_arch/plumbline-$prog" "$stage/host/$prog"
  done
else
  "$go" build -trimpath -buildvcs=false -o "$stage/host/" ./cmd/agent ./cmd/server
fi
date_iso=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
"$stage/host/manpage" -name plumbline-agent -prog agent -version "$VERSION" -date "$date_iso" \
  -summary "Plumbline agent: storage geometry and low-impact I/O probes" \
  -description "plumbline-agent runs on a database host. It discovers the geometry of every mounted volume (partitions, RAID, LVM, file systems), judges its alignment, runs small database-shaped I/O probes where its configuration schedules them, and reports to a Plumbline server over mutual TLS. The package installs it as the systemd service plumbline-agent, which is not started until the host is enrolled (plumbline-agent enroll) and the service is enabled." \
  -files "/etc/plumbline/agent.yaml=the configuration (plumbline-agent run --config FILE --check validates it);/var/lib/plumbline-agent=the spool (records not yet acknowledged by the server), the cached central policy, and tls/: the CA, certificate and key that plumbline-agent enroll writes and the agent renews;/etc/plumbline/tls=certificates of your own PKI (group plumbline);/usr/share/doc/plumbline-agent/examples/agent.yaml=every configuration key, annotated" \
  -see-also "plumbline-server(8), systemctl(1), journalctl(1)" \
  -o "$stage/man/plumbline-agent.8" "$stage/host/agent"
"$stage/host/manpage" -name plumbline-server -prog server -version "$VERSION" -date "$date_iso" -commands ca,token,agent,inventory \
  -summary "Plumbline server: agent ingest, store, inventory API and metrics" \
  -description "plumbline-server ingests the reports of Plumbline agents over gRPC with mutual TLS, keeps the fleet's volume inventory in SQLite or PostgreSQL, judges volumes, enrolls agents with join tokens, and serves the inventory API, health endpoints and Prometheus metrics over HTTP. The package installs it as the systemd service plumbline-server, which is not started until its certificates exist (plumbline-server ca init) and the service is enabled." \
  -files "/etc/plumbline/server.yaml=the configuration (plumbline-server --config FILE --config.check validates it);/etc/plumbline/pki=the enrollment CA and the server certificate that plumbline-server ca init creates;/var/lib/plumbline=the SQLite database;/usr/share/doc/plumbline-server/examples/server.yaml=every configuration key, annotated" \
  -see-also "plumbline-agent(8), systemctl(1), journalctl(1)" \
  -o "$stage/man/plumbline-server.8" "$stage/host/server"

for arch in $archs; do
  say "linux/$arch: plumbline-agent, plumbline-server $VERSION (.deb, .rpm)"
  stage_pkg agent "$arch" plumbline-agent 0700 /etc/plumbline/tls
  stage_pkg server "$arch" plumbline 0750 "/etc/plumbline/tls /etc/plumbline/pki"
done

if [[ $formats == *" zip "* ]]; then
  say "windows/amd64: agent zip"
  win=plumbline-agent_${VERSION}_windows_amd64
  build windows amd64 "$stage/agent.exe" ./cmd/agent
  rm -f "$dist/$win.zip"
  "$go" run ./deploy/packaging/winzip "$dist/$win.zip" \
    "$win/agent.exe=$stage/agent.exe" "$win/agent.yaml=deploy/windows/agent.yaml" \
    "$win/README.md=deploy/windows/README.md" "$win/LICENSE=LICENSE"
fi
rm -rf "$stage"
(cd "$dist" && shopt -s nullglob && sha256sum -- *.deb *.rpm *.zip >SHA256SUMS)
say "packages in $dist:"
ls -l "$dist"
