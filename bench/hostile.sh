#!/usr/bin/env bash
# Server memory under hostile input (issue 11 §2; figures in bench/RESULTS-hostile.md):
# starts `server --dev` on 127.0.0.1, fires ROUNDS rounds of REPORTS concurrent
# ~SIZE-byte Reports from AGENTS agent certificates (default 1) over mutual TLS at it
# (bench/hostile: half carry a SIZE-byte unknown field, half a record the
# server rejects), and reports the server's RSS before, its peak (VmHWM),
# RSS right after the last round and SETTLE seconds later, and the size of
# the store on disk.
#
# Usage: bench/hostile.sh
#        REV=bd28265 bench/hostile.sh      server built from that commit (the attack from the working tree)
#        REPORTS=200 ROUNDS=3 SIZE=3993600 CONNS=1 AGENTS=1 SETTLE=30 bench/hostile.sh
#        AGENTS=200 bench/hostile.sh      one Report per certificate: the server-wide bound, not the per-agent one
#        KEEP=1 bench/hostile.sh           keep the directory (server log)
#        MODE=anon-renew REPORTS=640 CONNS=40 ROUNDS=1 SIZE=4190000 bench/hostile.sh
#                                          a flood without a certificate: anon-renew, anon-check,
#                                          anon-enroll, anon-bundle (REPORTS calls at once per round)
#        MODE=watch REPORTS=600 bench/hostile.sh   600 WatchPolicy long-polls of one agent
set -euo pipefail

REPORTS=${REPORTS:-200}
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-3993600} # 3.9 MiB: under the default 4 MiB message limit with the envelope
CONNS=${CONNS:-1}
AGENTS=${AGENTS:-1}
SETTLE=${SETTLE:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/plumbline-hostile.XXXXXX)
server_pid=""

cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# go_heap: the Go runtime's view (heap in use, idle, released to the OS).
go_heap() {
	curl -s "http://127.0.0.1:$pprof_port/debug/pprof/heap?debug=1" |
		awk '/^# (HeapInuse|HeapIdle|HeapReleased|NextGC) =/ {printf "%s=%d MiB ", $2, $4/1048576}'
}
status_kb() { awk -v k="^$2:" '$0 ~ k {print $2}' "/proc/$1/status"; }

src=$root
if [ -n "${REV:-}" ]; then
	src=$work/src
	mkdir -p "$src" && git -C "$root" archive "$REV" | tar -x -C "$src"
fi
echo "== build server from ${REV:-the working tree} ($(git -C "$root" rev-parse --short "${REV:-HEAD}"))"
(cd "$src" && go build -o "$work/server" ./cmd/server)
(cd "$root" && go build -o "$work/hostile" ./bench/hostile)

port=$(free_port)
pprof_port=$(free_port)
"$work/server" --dev --data-dir "$work/data" --grpc.listen-address "127.0.0.1:$port" \
	--web.listen-address "127.0.0.1:$(free_port)" --debug.pprof-listen-address "127.0.0.1:$pprof_port" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [ -f "$work/data/dev/agent.yaml" ]; then break; fi
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
	sleep 0.1
done
sleep 2
echo "machine: $(nproc) cores; $(uptime | sed 's/.*load average: /load average /')"
echo "server RSS before: $(status_kb "$server_pid" VmRSS) kB"
"$work/hostile" --dev-dir "$work/data/dev" --reports "$REPORTS" --rounds "$ROUNDS" --size "$SIZE" --conns "$CONNS" --agents "$AGENTS" --mode "${MODE:-reports}"
echo "server RSS right after: $(status_kb "$server_pid" VmRSS) kB; peak (VmHWM): $(status_kb "$server_pid" VmHWM) kB; Go: $(go_heap)"
sleep "$SETTLE"
echo "server RSS ${SETTLE}s later: $(status_kb "$server_pid" VmRSS) kB; peak (VmHWM): $(status_kb "$server_pid" VmHWM) kB; Go: $(go_heap)"
echo "store on disk: $(du -sk "$work/data" | cut -f1) kB"
grep -c 'record rejected' "$work/server.log" | sed 's/^/server log: record-rejected lines: /' || true
echo "$(uptime | sed 's/.*load average: /load average /')"
