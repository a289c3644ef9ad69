#!/usr/bin/env bash
# An honest fleet over capacity (docs: admission, backpressure): starts
# `server --dev` (SQLite) on 127.0.0.1 and runs fleetsim with AGENTS agents
# offering RATE records/s for DURATION, far more than the store takes.
# Prints fleetsim's summary (records/s stored, report latency, errors,
# reports refused with a retry hint, records left unacknowledged) and the
# server's peak RSS (VmHWM).
#
# Usage: bench/overload.sh
#        AGENTS=1000 RATE=50000 DURATION=30s bench/overload.sh
#        REV=0b6bd4d bench/overload.sh   server and fleetsim built from that commit
set -euo pipefail

AGENTS=${AGENTS:-1000}
RATE=${RATE:-50000}
DURATION=${DURATION:-30s}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/plumbline-overload.XXXXXX)
server_pid=""
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

src=$root
if [ -n "${REV:-}" ]; then
	src=$work/src
	mkdir -p "$src" && git -C "$root" archive "$REV" | tar -x -C "$src"
fi
echo "== build from ${REV:-the working tree} ($(git -C "$root" rev-parse --short "${REV:-HEAD}"))"
(cd "$src" && go build -o "$work/server" ./cmd/server && go build -o "$work/fleetsim" ./cmd/fleetsim)
port=$(free_port)
"$work/server" --dev --data-dir "$work/data" --grpc.listen-address "127.0.0.1:$port" \
	--web.listen-address "127.0.0.1:$(free_port)" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [ -f "$work/data/dev/agent.yaml" ]; then break; fi
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
	sleep 0.1
done
echo "machine: $(nproc) cores; $(uptime | sed 's/.*load average: /load average /')"
echo "fleetsim: $AGENTS agents offering $RATE records/s for $DURATION"
"$work/fleetsim" --dev-dir "$work/data/dev" --agents "$AGENTS" --rate "$RATE" --duration "$DURATION" 2>"$work/fleetsim.err" | tail -12
echo "server peak RSS (VmHWM): $(awk '/^VmHWM/ {print $2}' "/proc/$server_pid/status") kB"
echo "$(uptime | sed 's/.*load average: /load average /')"
