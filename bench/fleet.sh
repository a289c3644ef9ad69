#!/usr/bin/env bash
# Fleet benchmark, end to end (see bench/RESULTS-fleet.md):
#   1. throughput into SQLite: `server --dev` + fleetsim with $AGENTS agents for $DURATION;
#   2. memory per connected agent and the restart test: a fresh server, fleetsim
#      with $RESTART_AGENTS agents (--reconnect), server RSS idle and with every
#      agent connected (VmRSS from /proc/PID/status), then the server is stopped
#      (SIGTERM) and started again on the same port and data directory; fleetsim
#      reports when every agent has had a successful Report again;
#   3. throughput into PostgreSQL, when the Debian PostgreSQL binaries are
#      there: a throwaway cluster in the temporary directory.
# Everything runs on this host; everything started is stopped on exit.
#
# Usage: bench/fleet.sh            (from the repository root or anywhere)
#        AGENTS=1000 DURATION=30s RESTART_AGENTS=5000 SKIP_PG=1 bench/fleet.sh
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

cleanup() {
	[ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
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

# start_server DATADIR GRPC_PORT [flags...]: starts `server --dev`, waits for its gRPC port.
start_server() {
	local dir=$1 port=$2
	shift 2
	"$work/server" --dev --data-dir "$dir" --grpc.listen-address "127.0.0.1:$port" \
		--web.listen-address "127.0.0.1:$(free_port)" "$@" >>"$dir.log" 2>&1 &
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

say "== build ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
(cd "$root" && go build -o "$work/server" ./cmd/server && go build -o "$work/fleetsim" ./cmd/fleetsim)
say "machine: $(nproc) cores, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo); open files: $(ulimit -n) soft, $(ulimit -Hn) hard"

say ""
say "== 1. SQLite: $AGENTS agents for $DURATION"
say "before: $(load)"
start_server "$work/sqlite" "$(free_port)"
"$work/fleetsim" --dev-dir "$work/sqlite/dev" --agents "$AGENTS" --duration "$DURATION" 2>"$work/fleet-sqlite.err" | tee "$work/fleet-sqlite.out"
say "after:  $(load)"
say "server peak RSS: $(awk '/^VmHWM/ {print $2 " kB"}' "/proc/$server_pid/status")"
stop_server

say ""
say "== 2. memory per connected agent and restart: $RESTART_AGENTS agents"
port=$(free_port)
start_server "$work/restart" "$port"
sleep 2
idle=$(rss_kb "$server_pid")
say "server RSS idle: $idle kB ($(load))"
"$work/fleetsim" --dev-dir "$work/restart/dev" --agents "$RESTART_AGENTS" --rate "$RESTART_AGENTS" \
	--report-interval 10s --duration 10m --reconnect >"$work/fleet-restart.out" 2>"$work/fleet-restart.err" &
fleet_pid=$!
for _ in $(seq 1800); do
	grep -q "agents connected in" "$work/fleet-restart.err" && break
	kill -0 "$fleet_pid" 2>/dev/null || { cat "$work/fleet-restart.err"; exit 1; }
	sleep 0.1
done
grep "agents connected in" "$work/fleet-restart.err"
sleep 15 # every agent has reported at least once (10 s interval)
conn=$(rss_kb "$server_pid")
say "server RSS with $RESTART_AGENTS agents connected: $conn kB ($(load))"
say "memory_per_agent_kb=$(( (conn - idle) / RESTART_AGENTS )) (($conn - $idle) kB / $RESTART_AGENTS)"
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
	say ""; say "== 3. PostgreSQL: skipped (no /usr/lib/postgresql/*/bin or no postgres user)"; exit 0
fi
say ""
say "== 3. PostgreSQL ($pgbin): $AGENTS agents for $DURATION"
mkdir -p "$work/pg" && chown postgres "$work/pg"
pgport=$(free_port)
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg/data" -A trust -U postgres >/dev/null
pg_ctl="$pgbin/pg_ctl"
runuser -u postgres -- "$pg_ctl" -D "$work/pg/data" -w -l "$work/pg/log" \
	-o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
say "before: $(load)"
start_server "$work/pgserver" "$(free_port)" --store.dsn "postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"
"$work/fleetsim" --dev-dir "$work/pgserver/dev" --agents "$AGENTS" --duration "$DURATION" 2>"$work/fleet-pg.err" | tee "$work/fleet-pg.out"
say "after:  $(load)"
stop_server
