# bench/fleetbox/lib.sh: the machinery of bench/fleet-in-a-box.sh, sourced
# by it: booting Debian hosts with systemd-nspawn, running commands in
# them, Prometheus queries, and the result table.
# shellcheck shell=bash

say() { printf '==> %s\n' "$*" >&2; }

# Results: one row per check, printed as a table and summed up at the end.
declare -a results=()
failed=0
skipped=0
result() { # CHECK pass|FAIL|skipped DETAIL
  results+=("$(printf '%-14s %-7s %s' "$1" "$2" "$3")")
  case $2 in
  FAIL) failed=$((failed + 1)) ;;
  skipped) skipped=$((skipped + 1)) ;;
  esac
  printf '    %-14s %-7s %s\n' "$1" "$2" "$3" >&2
}

# --- hosts ------------------------------------------------------------------

declare -A nspawn_pid=() host_of=()

# start MACHINE HOSTNAME: unpack the root file system (once per machine)
# and boot it with systemd as PID 1 (the host's network; no machined
# needed). ready MACHINE waits for multi-user.target.
start() {
  local m=$1 h=$2 dir=$work/machines/$1
  host_of[$m]=$h
  if [[ ! -d $dir ]]; then
    mkdir -p "$dir"
    tar -C "$dir" -xf "$rootfs"
    # The host names of the box: each host's own name (hostname -f) and the
    # server's, which the agents connect to.
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s.%s %s\n127.0.0.1\t%s\n' \
      "$h" "$domain" "$h" "$server_fqdn" >"$dir/etc/hosts"
    echo "$h" >"$dir/etc/hostname"
    mkdir -p "$dir/root/debs"
    cp "$dist1"/*.deb "$dist2"/*.deb "$dir/root/debs/"
  fi
  systemd-nspawn --boot --register=no --keep-unit --quiet --console=read-only \
    --machine="$m" --hostname="$h" --directory="$dir" >>"$work/logs/$m.console" 2>&1 </dev/null &
  nspawn_pid[$m]=$!
}

ready() {
  local m=$1 i state
  for ((i = 0; i < 180; i++)); do
    state=$(run_in "$m" systemctl is-system-running 2>/dev/null)
    # degraded is booted too: a unit failed that the box does not use
    case $state in running | degraded) return 0 ;; esac
    sleep 1
  done
  echo "boot $m: $state after 180 s (console: $work/logs/$m.console)" >&2
  return 1
}

# leader MACHINE: the container's PID 1 (as the host sees it).
leader() {
  local p=${nspawn_pid[$1]:-}
  [[ -n $p ]] || return 1
  local c
  c=$(ps -o pid= --ppid "$p" 2>/dev/null | head -1 | tr -d ' ')
  [[ -n $c ]] || return 1
  echo "$c"
}

# run_in MACHINE CMD...: run a command inside the host, as root.
run_in() {
  local l
  l=$(leader "$1") || return 1
  shift
  nsenter --target "$l" --mount --uts --ipc --pid --root --wd \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

# poweroff MACHINE: a clean shutdown (nspawn forwards SIGTERM to systemd as
# SIGRTMIN+3), then wait for it.
poweroff() {
  local p=${nspawn_pid[$1]:-} i
  [[ -n $p ]] || return 0
  kill -TERM "$p" 2>/dev/null
  for ((i = 0; i < 60; i++)); do
    kill -0 "$p" 2>/dev/null || break
    sleep 1
  done
  kill -KILL "$p" 2>/dev/null
  wait "$p" 2>/dev/null
  unset "nspawn_pid[$1]"
}

# --- Prometheus ---------------------------------------------------------------

# promq EXPR: the instant query's result vector (JSON).
promq() {
  curl -fsS --max-time 10 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" | jq -c '.data.result'
}

# alerts_now: "state alertname{labels}" lines of every pending or firing alert.
alerts_now() {
  curl -fsS --max-time 10 "http://127.0.0.1:$prom_port/api/v1/alerts" |
    jq -r '.data.alerts[] | "\(.state) \(.labels.alertname){agent_id=\(.labels.agent_id // ""),host=\(.labels.host // ""),mount_point=\(.labels.mount_point // "")}"'
}

# wait_for SECONDS CMD...: poll CMD every 2 s until it succeeds; prints the
# seconds it took. Fails after SECONDS.
wait_for() {
  local limit=$1 start=$SECONDS
  shift
  while ((SECONDS - start < limit)); do
    if "$@" >/dev/null 2>&1; then
      echo $((SECONDS - start))
      return 0
    fi
    sleep 2
  done
  return 1
}

# firing NAME [LABEL=VALUE]: an alert of that name is firing (with that label).
firing() {
  local sel="alertname=\"$1\",alertstate=\"firing\""
  [[ -n ${2:-} ]] && sel+=",${2%%=*}=\"${2#*=}\""
  [[ $(promq "ALERTS{$sel}" | jq length) -gt 0 ]]
}
not_firing() { ! firing "$@"; }

# api PATH: GET on the server's inventory API (loopback, the packaged default).
api() { curl -fsS --max-time 10 "http://127.0.0.1:$web_port$1"; }

# records: the records the server stored, per agent (agent_id=high water
# sequence, the last record sequence it acknowledged), one a line.
records() { api /api/v1/hosts | jq -r '.hosts[] | "\(.agent_id)=\(.high_water_sequence // 0)"' | sort; }
