#!/usr/bin/env bash
# Regenerate proto/**/*.pb.go (messages, and gRPC stubs as *_grpc.pb.go).
# With --check, regenerate into a temporary directory and fail if the
# committed files differ (stale generated code), and run `buf lint` (buf is
# pinned in tools/go.mod, apart from the main module; the first run builds it).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null; then
  echo "proto.sh: protoc not found; install Debian's protobuf-compiler and libprotobuf-dev" >&2
  exit 1
fi

out=.
if [[ "${1:-}" == "--check" ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

plugin_go=$(go tool -n protoc-gen-go)
plugin_grpc=$(go tool -n protoc-gen-go-grpc)
protos=$(find proto -name '*.proto' | sort)
protoc -I proto -I /usr/include \
  --plugin=protoc-gen-go="$plugin_go" \
  --plugin=protoc-gen-go-grpc="$plugin_grpc" \
  --go_out="$out" --go_opt=module=github.com/plumbline/plumbline \
  --go-grpc_out="$out" --go-grpc_opt=module=github.com/plumbline/plumbline \
  $protos

if [[ "${1:-}" == "--check" ]]; then
  stale=0
  if ! go -C tools tool buf lint ..; then
    echo "proto.sh: buf lint failed (configuration: buf.yaml)" >&2
    stale=1
  fi
  for f in $(cd "$out" && find . -name '*.pb.go' | sort); do
    if ! cmp -s "$out/$f" "$f"; then
      echo "proto.sh: $f is stale; run 'make proto' and commit the result" >&2
      stale=1
    fi
  done
  for f in $(find proto -name '*.pb.go' | sort); do
    [[ -f "$out/$f" ]] || { echo "proto.sh: $f has no .proto source any more" >&2; stale=1; }
  done
  exit $stale
fi
