#!/usr/bin/env bash
# The fleet in a box: Plumbline installed from its .deb packages on real
# Debian hosts (systemd-nspawn --boot), following the production path, with
# a real Prometheus and Alertmanager running the shipped rules.
#
#   bench/fleet-in-a-box.sh [--short] [--soak DURATION] [--keep]
#   make fleet-box [FLEETBOX_ARGS=--short]
#
# It builds the packages twice (VERSION and VERSION+1, scripts/packages.sh),
# boots one server host and five agent hosts from a Debian bookworm root
# (debootstrap, made once and kept in /var/cache/plumbline-fleetbox), and on
# them: `plumbline-server ca init`, the packaged server.yaml, `systemctl
# enable --now`, `plumbline-server token create`, `plumbline-agent enroll`
# as the agent's user, the server address in agent.yaml, `systemctl enable
# --now`. The agent hosts: db1 and db2 with a probe schedule, a second db2
# (the same host name, its own agent id), idle1 with the packaged config
# untouched but for the server address (no probes), maint1 inside a
# maintenance window. Prometheus and Alertmanager (Debian's packages) run on
# this machine as plain processes with the shipped rules and scrape the
# packaged server on its loopback address (the hosts share this machine's
# network).
#
# Checks, each printed with its result, then one line of figures:
#   visible   every agent and volume in the API and in /metrics
#   soak      no alert pending or firing on the healthy fleet for the soak
#             (default 20m; --short 2m)
#   agentdown powering off one agent's host fires PlumblineAgentDown for
#             exactly that agent; booting it again clears it
#   serverdown stopping the server fires the server's own down alert
#             (skipped when the rules have none); starting it clears it
#   upgrade   dpkg -i of VERSION+1 keeps the edited configs, restarts on the
#             new binaries and loses no record (per-agent high-water
#             sequences from the API)
#   purge     dpkg --purge leaves only the system user and the operator's
#             own files (the PKI that ca init made)
# --short also rewrites, in a temporary copy of the rules, the `for:` of the
# down alerts to 30s and scrapes every 5s (said in the output).
#
# Root; debootstrap, systemd-nspawn, nsenter, prometheus,
# prometheus-alertmanager, curl, jq, go. A missing tool skips the run and
# says so; under CI=true it fails instead. Exit status: 0 when every check
# passed, 1 otherwise. It cleans up (containers, processes, temporary
# directories) on exit; --keep keeps the work directory.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=bench/fleetbox/lib.sh
. bench/fleetbox/lib.sh

short=false
soak=20m
keep=false
while (($#)); do
  case $1 in
  --short) short=true soak=2m ;;
  --soak) soak=$2 && shift ;;
  --keep) keep=true ;;
  *) echo "usage: $0 [--short] [--soak DURATION] [--keep]" >&2 && exit 2 ;;
  esac
  shift
done
case $soak in
*m) soak_s=$((${soak%m} * 60)) ;;
*s) soak_s=${soak%s} ;;
*) echo "--soak $soak: want Ns or Nm" >&2 && exit 2 ;;
esac
ci=${CI:-false}
cache=${FLEETBOX_CACHE:-/var/cache/plumbline-fleetbox}

# --- what is needed -----------------------------------------------------------
missing=()
[[ $(id -u) == 0 ]] || missing+=("root")
for t in debootstrap systemd-nspawn nsenter prometheus promtool curl jq go tar; do
  command -v "$t" >/dev/null || missing+=("$t")
done
alertmanager=$(command -v prometheus-alertmanager || command -v alertmanager) || missing+=("prometheus-alertmanager")
if ((${#missing[@]})); then
  msg="skipped: the whole fleet box: missing ${missing[*]} (Debian: apt-get install debootstrap systemd-container prometheus prometheus-alertmanager curl jq)"
  echo "fleetbox: $msg"
  [[ $ci == true ]] && { echo "fleetbox: CI=true: nothing may be skipped" >&2 && exit 1; }
  exit 0
fi

grpc_port=7443 web_port=9464 prom_port=${FLEETBOX_PROM_PORT:-19090} am_port=${FLEETBOX_AM_PORT:-19093}
for p in $grpc_port $web_port $prom_port $am_port; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "fleetbox: port $p is in use on this machine; the box's hosts share its network (stop what listens there)" >&2
    exit 1
  fi
done

work=$(mktemp -d /tmp/plumbline-fleetbox.XXXXXX)
mkdir -p "$work/logs" "$work/machines" "$work/prom"
declare -a bg_pids=()
cleanup() {
  local m p waits=()
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  for m in "${!nspawn_pid[@]}"; do
    poweroff "$m" &
    waits+=($!)
  done
  wait "${waits[@]}" "${bg_pids[@]}" 2>/dev/null
  { findmnt -rn -o TARGET | grep "^$work/" | sort -r | xargs -r -n1 umount -l; } 2>/dev/null
  if $keep; then echo "fleetbox: kept $work" >&2; else rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

domain=fleetbox.test
server_host=fbserver
server_fqdn=$server_host.$domain
arch=$(go env GOARCH)

# --- packages -----------------------------------------------------------------
v1=${FLEETBOX_VERSION:-0.99.0}
v2=${v1%.*}.$((${v1##*.} + 1))
dist1=$work/dist-$v1 dist2=$work/dist-$v2
t0=$SECONDS
for v in "$v1" "$v2"; do
  say "packages $v (scripts/packages.sh, deb, $arch)"
  if ! VERSION=$v ARCHS=$arch FORMATS=deb DIST=$work/dist-$v ./scripts/packages.sh >"$work/logs/packages-$v.log" 2>&1; then
    tail -20 "$work/logs/packages-$v.log" >&2
    echo "fleetbox: packages.sh failed" >&2
    exit 1
  fi
done
build_s=$((SECONDS - t0))
say "root file system (debootstrap bookworm, cached in $cache)"
rootfs=$(bench/fleetbox/rootfs.sh "$cache") || exit 1

# --- the server host ------------------------------------------------------------
t0=$SECONDS
# machine name, host name, role (probes|idle|maint)
agents=("fb-db1 db1 probes" "fb-db2 db2 probes" "fb-db2b db2 idle" "fb-idle idle1 idle" "fb-maint maint1 maint")
say "booting $server_host and ${#agents[@]} agent hosts"
start fb-server "$server_host"
for a in "${agents[@]}"; do
  read -r m h _ <<<"$a"
  start "$m" "$h"
done
for m in "${!host_of[@]}"; do
  ready "$m" || exit 1
done
boot_s=$((SECONDS - t0))

. bench/fleetbox/install.sh
install_server || exit 1
for a in "${agents[@]}"; do
  read -r m h role <<<"$a"
  install_agent "$m" "$h" "$role" || result install FAIL "agent on $m: see above"
done

. bench/fleetbox/checks.sh
start_prometheus || exit 1
check_visible
check_soak
check_agentdown
check_serverdown
check_upgrade
check_purge

printf '\n%s\n' "${results[@]}"
echo
echo "fleetbox: $(figures)"
if ((failed > 0)); then exit 1; fi
if ((skipped > 0)) && [[ $ci == true ]]; then
  echo "fleetbox: CI=true: $skipped check(s) skipped" >&2
  exit 1
fi
exit 0
