#!/usr/bin/env bash
# Run Plumbline on this host with zero configuration: a dev server (SQLite,
# a fresh local CA and certificates, loopback listeners) and one agent
# against it, using the agent config the server writes. Ctrl-C stops both.
#
#   make run                          # data under ./.plumbline-dev
#   PLUMBLINE_DEV_DIR=/tmp/pl make run
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PLUMBLINE_DEV_DIR:-$PWD/.plumbline-dev}
mkdir -p "$dir"

server_pid= agent_pid=
stop() {
  trap - INT TERM EXIT
  [[ -n $agent_pid ]] && kill -TERM "$agent_pid" 2>/dev/null || true
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "plumbline: stopped"
}
trap stop INT TERM EXIT

./bin/server --dev --data-dir "$dir" &
server_pid=$!

# The server writes the agent's config (address, certificates, probe
# directory) once it listens.
for _ in $(seq 100); do
  [[ -s $dir/dev/agent.yaml ]] && grep -q address "$dir/dev/agent.yaml" && break
  kill -0 "$server_pid" 2>/dev/null || { echo "plumbline: server exited" >&2; exit 1; }
  sleep 0.1
done

./bin/agent run --config "$dir/dev/agent.yaml" &
agent_pid=$!

cat <<MSG

plumbline: server and agent are running (data in $dir).
  inventory:  curl -s http://127.0.0.1:9464/api/v1/volumes | jq .
  hosts:      curl -s http://127.0.0.1:9464/api/v1/hosts | jq .
  agent cfg:  $dir/dev/agent.yaml
  Ctrl-C stops both.

MSG
wait -n "$server_pid" "$agent_pid" || true
