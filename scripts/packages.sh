#!/usr/bin/env bash
# make packages: the .deb and .rpm of plumbline-agent and plumbline-server
# for each of ARCHS, and the Windows agent's zip, under DIST (default dist/).
#
#   VERSION   package version and what `agent version` prints (default: the
#             latest v* tag, v1.2.3-rc1 → 1.2.3~rc1, N commits after it
#             +N.g<commit>; without a tag 0.0.0~git<date>.<commit>)
#   ARCHS     Linux architectures (default: amd64 arm64)
#   DIST      output directory (default: dist)
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
# deploy/packaging/*.nfpm.yaml expect. The units and configs are the ones
# in deploy/, with the packaged paths: binaries in /usr/bin, the agent's
# spool in its own state directory (/var/lib/plumbline-agent, the unit's
# StateDirectory=).
stage_pkg() { # PROG ARCH STATE_DIR STATE_MODE
  local prog=$1 arch=$2 dir=$stage/$1-$2
  mkdir -p "$dir"
  build linux "$arch" "$dir/plumbline-$prog" "./cmd/$prog"
  sed "s#/usr/local/bin/plumbline-#/usr/bin/plumbline-#g" "deploy/systemd/plumbline-$prog.service" >"$dir/plumbline-$prog.service"
  sed "s#^  dir: /var/lib/plumbline/spool#  dir: /var/lib/plumbline-agent/spool#" "deploy/examples/$prog.yaml" >"$dir/$prog.yaml"
  cp LICENSE "$dir/"
  for s in preinstall postinstall preremove postremove; do
    sed -e "s#@PKG@#plumbline-$prog#g" -e "s#@STATE_DIR@#$3#g" -e "s#@STATE_MODE@#$4#g" \
      "deploy/packaging/scripts/$s.sh" >"$dir/$s.sh"
  done
  for packager in deb rpm; do
    (cd "$dir" && ARCH=$arch "$stage/nfpm" package --config "$root/deploy/packaging/$prog.nfpm.yaml" \
      --packager "$packager" --target "$dist/" >/dev/null)
  done
}

for arch in $archs; do
  say "linux/$arch: plumbline-agent, plumbline-server $VERSION (.deb, .rpm)"
  stage_pkg agent "$arch" plumbline-agent 0700
  stage_pkg server "$arch" plumbline 0750
done

say "windows/amd64: agent zip"
win=plumbline-agent_${VERSION}_windows_amd64
build windows amd64 "$stage/agent.exe" ./cmd/agent
rm -f "$dist/$win.zip"
"$go" run ./deploy/packaging/winzip "$dist/$win.zip" \
  "$win/agent.exe=$stage/agent.exe" "$win/agent.yaml=deploy/windows/agent.yaml" \
  "$win/README.md=deploy/windows/README.md" "$win/LICENSE=LICENSE"

rm -rf "$stage"
(cd "$dist" && sha256sum -- *.deb *.rpm *.zip >SHA256SUMS)
say "packages in $dist:"
ls -l "$dist"
