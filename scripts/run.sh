#!/usr/bin/env bash
# Run Plumbline on this host with zero configuration: a dev server (SQLite,
# a fresh local CA and certificates, loopback listeners) and one agent
# against it, using the agent config the server writes. Ctrl-C stops both
# and exits 0.
#
#   make run                          # data under ./.plumbline-dev
#   PLUMBLINE_DEV_DIR=/tmp/pl make run
#   PLUMBLINE_GRPC_ADDRESS=127.0.0.1:7453 PLUMBLINE_WEB_ADDRESS=127.0.0.1:9474 make run
#                                     # a second dev server beside the first
#   PLUMBLINE_BIN=DIR                 # where server and agent are (default ./bin)
#
# It says "running" only once the server's /healthz answers and the
# agent's does too. When the server cannot start (a port in use, say) or
# either process exits by itself, it says so and exits non-zero.
# DIR/dev/agent.yaml is rewritten at every start; your own agent keys go in
# DIR/dev/agent.local.yaml, which is never rewritten.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PLUMBLINE_DEV_DIR:-$PWD/.plumbline-dev}
bin=${PLUMBLINE_BIN:-./bin}
grpc_addr=${PLUMBLINE_GRPC_ADDRESS:-127.0.0.1:7443}
web_addr=${PLUMBLINE_WEB_ADDRESS:-127.0.0.1:9464}
mkdir -p "$dir"

server_pid= agent_pid=
stop() {
  trap - INT TERM EXIT
  [[ -n $agent_pid ]] && kill -TERM "$agent_pid" 2>/dev/null || true
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "plumbline: stopped"
}
# Ctrl-C (SIGINT to the whole foreground job: this script, the server and
# the agent) and SIGTERM are how it is meant to end: both stop cleanly and
# exit 0, so make prints no "*** Error".
trap 'stop; exit 0' INT TERM
trap stop EXIT

# healthy ADDR: GET http://ADDR/healthz answers 200 (bash's /dev/tcp: no
# curl needed).
healthy() {
  local host=${1%:*} port=${1##*:} status=
  host=${host#[} host=${host%]}
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3
  IFS= read -r -t 2 status <&3 || true
  exec 3<&- 3>&-
  [[ $status == "HTTP/1."?" 200"* ]]
}

# gone PID WHAT: when the process has exited, say so and exit non-zero.
gone() {
  kill -0 "$1" 2>/dev/null && return 0
  local rc=0
  wait "$1" || rc=$?
  echo "plumbline: the $2 exited (status $rc) before it was ready; see its log above." >&2
  if [[ $2 == server ]]; then
    echo "plumbline: is $grpc_addr or $web_addr in use (another 'make run' or server)? Choose others with PLUMBLINE_GRPC_ADDRESS and PLUMBLINE_WEB_ADDRESS." >&2
  fi
  exit $((rc == 0 ? 1 : rc))
}

banner=$dir/server.out
: >"$banner"
"$bin/server" --dev --data-dir "$dir" --grpc.listen-address "$grpc_addr" --web.listen-address "$web_addr" >"$banner" &
server_pid=$!

# Ready when the banner names the HTTP address and /healthz answers there.
http=
for ((i = 0; ; i++)); do
  gone "$server_pid" server
  [[ -z $http ]] && http=$(sed -n 's|^  HTTP: *http://\([^/]*\)/.*|\1|p' "$banner")
  [[ -n $http ]] && healthy "$http" 2>/dev/null && break
  if ((i >= 600)); then
    echo "plumbline: the server did not answer on ${http:-its HTTP address} within 60s" >&2
    exit 1
  fi
  sleep 0.1
done
cat "$banner"

agent_web=$(sed -n 's|^  listen_address: *\([^ #]*\).*|\1|p' "$dir/dev/agent.yaml" | tr -d '"')
"$bin/agent" run --config "$dir/dev/agent.yaml" &
agent_pid=$!
if [[ -n $agent_web ]]; then
  for ((i = 0; ; i++)); do
    gone "$agent_pid" agent
    healthy "$agent_web" 2>/dev/null && break
    if ((i >= 300)); then
      echo "plumbline: the agent did not answer on $agent_web within 30s" >&2
      exit 1
    fi
    sleep 0.1
  done
fi

cat <<MSG

plumbline: server and agent are running (data in $dir).
  inventory:  curl -s http://$http/api/v1/volumes | jq .
  hosts:      curl -s http://$http/api/v1/hosts | jq .
  agent:      ${agent_web:+http://$agent_web/metrics}
  agent cfg:  $dir/dev/agent.yaml (rewritten at every start)
  your keys:  $dir/dev/agent.local.yaml (never rewritten; e.g. declared_devices)
  Ctrl-C stops both.

MSG
rc=0
wait -n "$server_pid" "$agent_pid" || rc=$?
which=server
kill -0 "$server_pid" 2>/dev/null && which=agent
# Status 0: it was told to stop (Ctrl-C reaches the whole job; bash may
# not run the INT trap when the child it waits for exits cleanly first).
# The EXIT trap stops the other one.
((rc == 0)) && exit 0
echo "plumbline: the $which exited (status $rc); stopping" >&2
exit "$rc"
