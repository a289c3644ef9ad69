#!/usr/bin/env bash
# Fleet benchmark, end to end (see bench/RESULTS-fleet.md):
#   1. throughput into SQLite: `server --dev` + fleetsim with $AGENTS agents for $DURATION;
#   2. memory per connected agent, idle: a fresh server, fleetsim with
#      $RESTART_AGENTS agents at --rate 0 (connected, Hello and the first
#      geometry report done, then nothing but keepalives); server VmRSS
#      before and 15 s after every agent said Hello, plus the Go heap and
#      stacks from /debug/pprof (--debug.pprof-listen-address);
#   3. memory per connected agent, busy, and the restart test: a fresh
#      server, fleetsim with $RESTART_AGENTS agents sending $RESTART_AGENTS
#      records/s (--reconnect), the same RSS figures, then the server is
#      stopped (SIGTERM) and started again on the same port and data
#      directory; fleetsim reports when every agent has had a successful
#      Report again;
#   4. throughput into PostgreSQL, when the Debian PostgreSQL binaries are
#      there: a throwaway cluster (max_connections=200) in the temporary
#      directory; the server's connections (pg_stat_activity) are sampled
#      and PostgreSQL's FATAL log lines counted.
# Everything runs on this host; everything started is stopped on exit.
#
# Usage: bench/fleet.sh            (from the repository root or anywhere)
#        AGENTS=1000 DURATION=30s RESTART_AGENTS=5000 SKIP_PG=1 bench/fleet.sh
#        PG_DSN_PARAMS='&pool_max_conns=32' bench/fleet.sh   (store pool, see store.Open)
#        SNAPSHOT=1 bench/fleet.sh builds HEAD's tree (git archive), not the working tree
#        KEEP=1 bench/fleet.sh     keeps the directory: logs, heap profiles
#                                  (go tool pprof -sample_index=inuse_space DIR/heap-idle.pb.gz)
set -euo pipefail

AGENTS=${AGENTS:-1000}
DURATION=${DURATION:-30s}
RESTART_AGENTS=${RESTART_AGENTS:-5000}
SKIP_PG=${SKIP_PG:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/plumbline-fleet.XXXXXX)
chmod 755 "$work"
server_pid=""
fleet_pid=""
pg_ctl=""
activity_pid=""

cleanup() {
	[ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
	[ -n "$activity_pid" ] && kill "$activity_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ -n "$pg_ctl" ]; then
		runuser -u postgres -- "$pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s\n' "$*"; }
load() { uptime | sed 's/.*load average: /load average /'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
pprof_port=""
# go_mem: the Go runtime's view of the server (heap in use, stacks, goroutines), then the
# live heap after a forced GC (take RSS first), saving that heap profile as $1.
go_mem() {
	local g h l
	g=$(curl -s "http://127.0.0.1:$pprof_port/debug/pprof/goroutine?debug=1" | sed -n 's/^goroutine profile: total //p')
	h=$(curl -s "http://127.0.0.1:$pprof_port/debug/pprof/heap?debug=1" | awk '/^# (HeapInuse|HeapAlloc|Stack|Sys|NextGC) =/ {printf "%s=%d MiB ", $2, $4/1048576}')
	curl -s "http://127.0.0.1:$pprof_port/debug/pprof/heap?gc=1" -o "$1" || true
	l=$(curl -s "http://127.0.0.1:$pprof_port/debug/pprof/heap?debug=1" | awk '/^# HeapAlloc =/ {printf "%d MiB", $4/1048576}')
	printf 'goroutines=%s %s; after a forced GC: live heap %s' "$g" "$h" "$l"
}

# start_server DATADIR GRPC_PORT [flags...]: starts `server --dev`, waits for its gRPC port.
start_server() {
	local dir=$1 port=$2
	shift 2
	pprof_port=$(free_port)
	"$work/server" --dev --data-dir "$dir" --grpc.listen-address "127.0.0.1:$port" \
		--web.listen-address "127.0.0.1:$(free_port)" --debug.pprof-listen-address "127.0.0.1:$pprof_port" "$@" >>"$dir.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 300); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [ -f "$dir/dev/agent.yaml" ]; then return 0; fi
		kill -0 "$server_pid" 2>/dev/null || { cat "$dir.log"; return 1; }
		sleep 0.1
	done
	say "server did not come up"; cat "$dir.log"; return 1
}

stop_server() {
	kill -TERM "$server_pid"
	wait "$server_pid" || true
	server_pid=""
}

src=$root
if [ -n "${SNAPSHOT:-}" ]; then
	# The committed tree only (others may be editing the working tree).
	src=$work/src
	mkdir -p "$src" && git -C "$root" archive HEAD | tar -x -C "$src"
fi
say "== build ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')${SNAPSHOT:+, committed tree only})"
(cd "$src" && go build -o "$work/server" ./cmd/server && go build -o "$work/fleetsim" ./cmd/fleetsim)
say "machine: $(nproc) cores, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo); open files: $(ulimit -n) soft, $(ulimit -Hn) hard"

say ""
say "== 1. SQLite: $AGENTS agents for $DURATION"
say "before: $(load)"
start_server "$work/sqlite" "$(free_port)"
"$work/fleetsim" --dev-dir "$work/sqlite/dev" --agents "$AGENTS" --duration "$DURATION" 2>"$work/fleet-sqlite.err" | tee "$work/fleet-sqlite.out"
say "after:  $(load)"
say "server peak RSS: $(awk '/^VmHWM/ {print $2 " kB"}' "/proc/$server_pid/status")"
stop_server

# wait_connected FILE: until fleetsim (pid $fleet_pid) says every agent said Hello.
wait_connected() {
	for _ in $(seq 1800); do
		grep -q "agents connected in" "$1" && break
		kill -0 "$fleet_pid" 2>/dev/null || { cat "$1"; exit 1; }
		sleep 0.1
	done
	grep "agents connected in" "$1"
}

say ""
say "== 2. memory per connected agent, idle: $RESTART_AGENTS agents at --rate 0"
start_server "$work/idle" "$(free_port)"
sleep 2
idle=$(rss_kb "$server_pid")
say "server RSS before: $idle kB ($(load)); $(go_mem "$work/heap-idle-before.pb.gz")"
"$work/fleetsim" --dev-dir "$work/idle/dev" --agents "$RESTART_AGENTS" --rate 0 --duration 10m \
	>"$work/fleet-idle.out" 2>"$work/fleet-idle.err" &
fleet_pid=$!
wait_connected "$work/fleet-idle.err"
sleep 15 # the first (geometry) report of every agent is in
conn=$(rss_kb "$server_pid")
say "server RSS with $RESTART_AGENTS idle agents connected: $conn kB ($(load)); $(go_mem "$work/heap-idle.pb.gz")"
say "memory_per_agent_idle_kb=$(( (conn - idle) / RESTART_AGENTS )) (($conn - $idle) kB / $RESTART_AGENTS)"
kill "$fleet_pid"; wait "$fleet_pid" 2>/dev/null || true
fleet_pid=""
stop_server

say ""
say "== 3. memory per connected agent, busy, and restart: $RESTART_AGENTS agents, $RESTART_AGENTS records/s"
port=$(free_port)
start_server "$work/restart" "$port"
sleep 2
idle=$(rss_kb "$server_pid")
say "server RSS before: $idle kB ($(load))"
"$work/fleetsim" --dev-dir "$work/restart/dev" --agents "$RESTART_AGENTS" --rate "$RESTART_AGENTS" \
	--report-interval 10s --duration 10m --reconnect >"$work/fleet-restart.out" 2>"$work/fleet-restart.err" &
fleet_pid=$!
wait_connected "$work/fleet-restart.err"
sleep 15 # every agent has reported at least once (10 s interval)
conn=$(rss_kb "$server_pid")
say "server RSS with $RESTART_AGENTS agents connected and sending: $conn kB ($(load)); $(go_mem "$work/heap-busy.pb.gz")"
say "memory_per_agent_busy_kb=$(( (conn - idle) / RESTART_AGENTS )) (($conn - $idle) kB / $RESTART_AGENTS)"
say "restart: SIGTERM, then start again on 127.0.0.1:$port ($(load))"
t_stop=$(date +%s%3N)
stop_server
t_down=$(date +%s%3N)
start_server "$work/restart" "$port"
t_up=$(date +%s%3N)
say "server stopped in $(( t_down - t_stop )) ms, listening again $(( t_up - t_down )) ms later"
wait "$fleet_pid" || true
fleet_pid=""
cat "$work/fleet-restart.out"
last=$(sed -n 's/.*reconnect_last_resume_unix_ms=\([0-9]*\).*/\1/p' "$work/fleet-restart.out")
if [ -n "$last" ]; then
	say "restart_resume_seconds=$(awk -v a="$last" -v b="$t_stop" 'BEGIN {printf "%.1f", (a-b)/1000}') (from SIGTERM to the last agent's first successful Report; $(awk -v a="$last" -v b="$t_up" 'BEGIN {printf "%.1f", (a-b)/1000}') s after the new server listened)"
else
	say "restart: not every agent resumed (see above)"
fi
say "after:  $(load)"
stop_server

if [ -n "$SKIP_PG" ]; then exit 0; fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$pgbin" ] || ! id postgres >/dev/null 2>&1; then
	say ""; say "== 4. PostgreSQL: skipped (no /usr/lib/postgresql/*/bin or no postgres user)"; exit 0
fi
say ""
say "== 4. PostgreSQL ($pgbin): $AGENTS agents for $DURATION"
mkdir -p "$work/pg" && chown postgres "$work/pg"
pgport=$(free_port)
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg/data" -A trust -U postgres >/dev/null
pg_ctl="$pgbin/pg_ctl"
runuser -u postgres -- "$pg_ctl" -D "$work/pg/data" -w -l "$work/pg/log" \
	-o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
say "before: $(load)"
start_server "$work/pgserver" "$(free_port)" --store.dsn "postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable${PG_DSN_PARAMS:-}"
(
	while :; do
		runuser -u postgres -- "$pgbin/psql" -h 127.0.0.1 -p "$pgport" -Atc \
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" 2>/dev/null || true
		sleep 2
	done
) >"$work/pg-activity" &
activity_pid=$!
"$work/fleetsim" --dev-dir "$work/pgserver/dev" --agents "$AGENTS" --duration "$DURATION" 2>"$work/fleet-pg.err" | tee "$work/fleet-pg.out"
kill "$activity_pid" 2>/dev/null || true
say "after:  $(load)"
say "server connections to PostgreSQL (pg_stat_activity, every 2 s): max $(sort -n "$work/pg-activity" | tail -1)"
say "PostgreSQL FATAL log lines: $(grep -c FATAL "$work/pg/log" || true); server ERROR log lines: $(grep -c 'level=ERROR' "$work/pgserver.log" || true)"
stop_server
