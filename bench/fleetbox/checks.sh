# bench/fleetbox/checks.sh: Prometheus, Alertmanager and the checks of
# bench/fleet-in-a-box.sh (sourced by it).
# shellcheck shell=bash

declare -A fig=()
rules_note="shipped rules unchanged"
server_down_rule=""

# start_prometheus: Alertmanager and Prometheus as plain processes, each in
# a temporary directory, with the shipped rules and Alertmanager config; the
# scrape target is the packaged server's loopback web address.
start_prometheus() {
  local d=$work/prom interval=1m
  cp deploy/prometheus/plumbline.rules.yml "$d/plumbline.rules.yml"
  server_down_rule=$(yq_alerts "$d/plumbline.rules.yml" | grep -E -m1 'Server.*(Down|Absent)|PlumblineServerUnreachable' || true)
  if $short; then
    interval=5s
    # Only in a temporary copy, and said in the output.
    local a
    for a in PlumblineAgentDown $server_down_rule; do
      rewrite_for "$d/plumbline.rules.yml" "$a" 30s
    done
    rules_note="--short: for: of PlumblineAgentDown${server_down_rule:+ and $server_down_rule} rewritten to 30s in a temporary copy; scrape and evaluation every 5s"
  fi
  promtool check rules "$d/plumbline.rules.yml" >/dev/null || { echo "fleetbox: rules copy does not load" >&2 && return 1; }
  sed -e "s#alertmanager.example.internal:9093#127.0.0.1:$am_port#" \
    -e "s#plumbline.example.internal:9464#127.0.0.1:$web_port#" \
    -e "s#^  scrape_interval: .*#  scrape_interval: $interval#" \
    -e "s#^  evaluation_interval: .*#  evaluation_interval: $interval#" \
    -e "s#scrape_timeout: 30s#scrape_timeout: 4s#" \
    deploy/prometheus/prometheus.yml >"$d/prometheus.yml"
  $short || sed -i "s#scrape_timeout: 4s#scrape_timeout: 30s#" "$d/prometheus.yml"
  promtool check config "$d/prometheus.yml" >/dev/null 2>&1 || { promtool check config "$d/prometheus.yml" >&2 && return 1; }
  mkdir -p "$d/am-data" "$d/tsdb"
  "$alertmanager" --config.file=deploy/alertmanager/alertmanager.yml --storage.path="$d/am-data" \
    --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$work/logs/alertmanager.log" 2>&1 &
  bg_pids+=($!)
  prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/logs/prometheus.log" 2>&1 &
  bg_pids+=($!)
  wait_for 60 curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null || { echo "fleetbox: Prometheus not ready" >&2 && return 1; }
  # The first scrape of the server.
  wait_for 150 test_up >/dev/null || { echo "fleetbox: Prometheus does not scrape the server" >&2 && return 1; }
  # Before its first scrape Prometheus has no up series: the server-down
  # rule's absent(up) is pending until an evaluation after that scrape.
  wait_for 200 no_startup_alerts >/dev/null
}
no_startup_alerts() { local a; a=$(alerts_now) && [[ $a != *ServerDown* ]]; }
test_up() { [[ $(promq 'up{job="plumbline"} == 1' | jq length) -gt 0 ]]; }

# yq_alerts FILE: the alert names of a rules file.
yq_alerts() { sed -n 's/^ *- alert: *//p' "$1"; }

# rewrite_for FILE ALERT DURATION: the `for:` of that alert's rule.
rewrite_for() {
  awk -v a="$2" -v d="$3" '
    /^ *- (alert|record):/ { cur = ($0 ~ "alert: *" a "$") }
    cur && /^ *for:/ { sub(/for: *[0-9a-z]+/, "for: " d) }
    { print }' "$1" >"$1.new" && mv "$1.new" "$1"
}

# check_visible: every agent and volume is in the API and in /metrics.
check_visible() {
  local want=${#agents[@]} n_api vol_api n_up n_info
  # Agents send geometry at start: wait until every one has reported.
  wait_for 120 all_reported >/dev/null
  n_api=$(api /api/v1/hosts | jq '.hosts | length')
  vol_api=$(api '/api/v1/volumes?limit=1000' | jq '.volumes | length')
  n_up=$(promq 'plumbline_agent_up' | jq length)
  n_info=$(promq 'plumbline_volume_info' | jq length)
  fig[hosts]="$n_api/$want"
  fig[volumes]="api=$vol_api,volume_info=$n_info"
  fig[agent_up]="$n_up/$want"
  if [[ $n_api == "$want" && $n_up == "$want" && $n_info == "$vol_api" && $vol_api -ge $want ]]; then
    result visible pass "agents in API $n_api/$want, plumbline_agent_up series $n_up, volumes API $vol_api = plumbline_volume_info $n_info"
  else
    result visible FAIL "agents in API $n_api/$want, plumbline_agent_up series $n_up/$want, volumes API $vol_api vs plumbline_volume_info $n_info (two agents on host db2 must not merge)"
  fi
}
all_reported() { [[ $(api /api/v1/hosts | jq '[.hosts[] | select(.volume_count > 0)] | length') -ge ${#agents[@]} ]]; }

# check_soak: nothing pending or firing on the healthy fleet for the soak.
check_soak() {
  local start=$SECONDS seen=$work/alerts-seen
  say "soak: $soak with the healthy fleet (every alert pending or firing is a failure)"
  : >"$seen"
  while ((SECONDS - start < soak_s)); do
    alerts_now >>"$seen" 2>/dev/null
    sleep 5
  done
  local distinct
  distinct=$(sed 's/^[a-z]* //' "$seen" | sort -u)
  fig[soak]="${soak}:$(grep -c . <<<"$distinct")alerts"
  if [[ -z $distinct ]]; then
    result soak pass "$soak: no alert pending or firing (agents: 2 probing, 1 idle with the packaged config, 1 in a maintenance window, 2 on one host name)"
  else
    result soak FAIL "$soak: $(tr '\n' ' ' <<<"$distinct")"
  fi
}

# check_agentdown: power off one agent's host; PlumblineAgentDown fires for
# exactly that agent; boot it again and it clears.
check_agentdown() {
  local m=fb-db1 id=db1 t_fire t_clear others
  say "agentdown: powering off $m"
  poweroff $m
  if t_fire=$(wait_for 900 firing PlumblineAgentDown "agent_id=$id"); then
    others=$(promq 'ALERTS{alertname="PlumblineAgentDown"}' | jq -r --arg id "$id" '[.[] | select(.metric.agent_id != $id) | .metric.agent_id] | unique | join(",")')
    start $m "${host_of[$m]}"
    ready $m
    if t_clear=$(wait_for 600 not_firing PlumblineAgentDown "agent_id=$id"); then
      fig[agentdown]="fired:${t_fire}s,cleared:${t_clear}s"
      if [[ -z $others ]]; then
        result agentdown pass "fired for agent $id only after ${t_fire}s; cleared ${t_clear}s after its host booted again"
      else
        result agentdown FAIL "fired for $id after ${t_fire}s, and also for: $others"
      fi
    else
      fig[agentdown]="fired:${t_fire}s,cleared:no"
      result agentdown FAIL "fired for $id after ${t_fire}s but did not clear within 600s of its host booting"
    fi
  else
    fig[agentdown]="fired:no"
    result agentdown FAIL "PlumblineAgentDown{agent_id=$id} did not fire within 900s of its host powering off"
    start $m "${host_of[$m]}"
    ready $m
  fi
}

# check_serverdown: stop the server; the server's own down alert fires;
# start it, it clears.
check_serverdown() {
  if [[ -z $server_down_rule ]]; then
    fig[serverdown]="skipped"
    result serverdown skipped "rule absent: the shipped rules have no server-down alert"
    return
  fi
  local t_fire t_clear
  say "serverdown: systemctl stop plumbline-server"
  run_in fb-server systemctl stop plumbline-server
  if t_fire=$(wait_for 900 firing "$server_down_rule"); then
    run_in fb-server systemctl start plumbline-server
    t_clear=$(wait_for 600 not_firing "$server_down_rule") || t_clear=no
    fig[serverdown]="fired:${t_fire}s,cleared:${t_clear}s"
    if [[ $t_clear == no ]]; then
      result serverdown FAIL "$server_down_rule fired after ${t_fire}s, did not clear"
    else
      result serverdown pass "$server_down_rule fired after ${t_fire}s; cleared ${t_clear}s after the start"
    fi
  else
    run_in fb-server systemctl start plumbline-server
    fig[serverdown]="fired:no"
    result serverdown FAIL "$server_down_rule did not fire within 900s"
  fi
  wait_for 60 api /readyz >/dev/null
}

# check_upgrade: edit the configs, dpkg -i VERSION+1 on every host: the
# edits stay, the services run the new binaries, no record is lost.
check_upgrade() {
  local before after m a bad=() lost
  # Every agent reconnected and reported after the checks above.
  wait_for 120 all_reported >/dev/null
  before=$(records)
  for m in "${!host_of[@]}"; do
    [[ $m == fb-server ]] && f=server.yaml || f=agent.yaml
    [[ -n ${nspawn_pid[$m]:-} ]] || continue
    printf '# edited by the operator (fleet box)\n' >>"$work/machines/$m/etc/plumbline/$f"
    pkg=plumbline-${f%.yaml}
    if ! run_in "$m" dpkg -i "/root/debs/${pkg}_${v2}-1_${arch}.deb" </dev/null >"$work/logs/$m.upgrade" 2>&1; then
      bad+=("$m: dpkg -i failed")
      continue
    fi
    grep -q '^# edited by the operator (fleet box)$' "$work/machines/$m/etc/plumbline/$f" || bad+=("$m: $f replaced")
    [[ $(run_in "$m" "$pkg" "$([[ $pkg == plumbline-server ]] && echo --version || echo version)") == *"$v2"* ]] || bad+=("$m: not $v2")
  done
  wait_for 60 api /readyz >/dev/null
  for m in "${!host_of[@]}"; do
    [[ $m == fb-server ]] && pkg=plumbline-server || pkg=plumbline-agent
    wait_for 30 run_in "$m" systemctl is-active --quiet "$pkg" >/dev/null || bad+=("$m: $pkg not active after the upgrade")
  done
  sleep 20 # a report interval and more: agents send what they spooled
  after=$(records)
  lost=$(join -t= -j1 <(echo "$before") <(echo "$after") | awk -F= '$3 < $2 {print $1 ":" $2 "->" $3}')
  local sum_b sum_a
  sum_b=$(awk -F= '{s += $2} END {print s + 0}' <<<"$before")
  sum_a=$(awk -F= '{s += $2} END {print s + 0}' <<<"$after")
  fig[upgrade]="$v1->$v2,records:$sum_b->$sum_a"
  [[ -n $lost ]] && bad+=("records lost: $lost")
  [[ $(grep -c . <<<"$after") -lt $(grep -c . <<<"$before") ]] && bad+=("agents missing after the upgrade")
  if ((${#bad[@]} == 0)); then
    result upgrade pass "$v1 -> $v2 on every host: edited configs kept, services restarted on $v2, records $sum_b -> $sum_a (none lost)"
  else
    result upgrade FAIL "$(printf '%s; ' "${bad[@]}")"
  fi
}

# check_purge: dpkg --purge on an agent host and the server host; what is
# left is the system user and group (Debian policy) and the operator's PKI.
check_purge() {
  local m left bad=() pkg
  local -A allowed=([fb-idle]="" [fb-server]="/etc/plumbline /etc/plumbline/pki /etc/plumbline/pki/ca.crt /etc/plumbline/pki/ca.key /etc/plumbline/pki/server.crt /etc/plumbline/pki/server.key")
  local summary=()
  for m in fb-idle fb-server; do
    [[ $m == fb-server ]] && pkg=plumbline-server || pkg=plumbline-agent
    run_in "$m" systemctl is-active --quiet "$pkg" || true
    if ! run_in "$m" dpkg --purge "$pkg" >"$work/logs/$m.purge" 2>&1; then
      bad+=("$m: dpkg --purge failed")
      continue
    fi
    left=$(run_in "$m" sh -c 'find /etc/plumbline /var/lib/plumbline /var/lib/plumbline-agent /usr/bin/plumbline-* /usr/lib/systemd/system/plumbline-* /etc/systemd/system/multi-user.target.wants/plumbline-* /usr/share/doc/plumbline-* /usr/share/man/man8/plumbline-* 2>/dev/null' | sort | tr '\n' ' ')
    local f extra=()
    for f in $left; do
      [[ " ${allowed[$m]} " == *" $f "* ]] || extra+=("$f")
    done
    run_in "$m" getent passwd plumbline >/dev/null || bad+=("$m: user plumbline removed (policy keeps it)")
    ((${#extra[@]})) && bad+=("$m: left ${extra[*]}")
    summary+=("$m: user plumbline${left:+, $left}")
  done
  fig[purge]=$( ((${#bad[@]})) && echo FAIL || echo ok)
  if ((${#bad[@]} == 0)); then
    result purge pass "left only: $(printf '%s; ' "${summary[@]}")"
  else
    result purge FAIL "$(printf '%s; ' "${bad[@]}")"
  fi
}

figures() {
  printf 'total=%ss ca=%s build=%ss boot=%ss hosts=%s agent_up=%s volumes=%s soak=%s agentdown=%s serverdown=%s upgrade=%s purge=%s failed=%s skipped=%s (%s)' \
    "$SECONDS" "${ca_path// /-}" "$build_s" "$boot_s" "${fig[hosts]:-?}" "${fig[agent_up]:-?}" "${fig[volumes]:-?}" "${fig[soak]:-?}" \
    "${fig[agentdown]:-?}" "${fig[serverdown]:-?}" "${fig[upgrade]:-?}" "${fig[purge]:-?}" "$failed" "$skipped" "$rules_note"
}
