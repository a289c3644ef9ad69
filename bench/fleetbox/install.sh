# bench/fleetbox/install.sh: the production path, word for word, on the
# box's hosts (sourced by bench/fleet-in-a-box.sh).
# shellcheck shell=bash

ca_path=""   # how the PKI was made: "ca init", or the stand-in when it is absent
join_token="" ca_pin=""

# install_server: dpkg -i; plumbline-server ca init --dir /etc/plumbline/pki
# --name $(hostname -f); the packaged server.yaml as it is (it names those
# files); --config.check; systemctl enable --now; token create.
install_server() {
  local m=fb-server out
  say "$m: dpkg -i plumbline-server $v1"
  run_in $m dpkg -i "/root/debs/plumbline-server_${v1}-1_${arch}.deb" >"$work/logs/$m.dpkg" 2>&1 ||
    { cat "$work/logs/$m.dpkg" >&2 && return 1; }
  # (Not `| grep -q`: under pipefail its early exit fails the pipeline.)
  if [[ $(run_in $m plumbline-server ca --help 2>&1) == *"ca init"* ]]; then
    ca_path="ca init"
    say "$m: plumbline-server ca init --dir /etc/plumbline/pki --name \$(hostname -f)"
    if ! run_in $m sh -c 'plumbline-server ca init --dir /etc/plumbline/pki --name "$(hostname -f)"' >"$work/logs/ca-init" 2>&1; then
      result ca-init FAIL "$(tail -1 "$work/logs/ca-init")"
      return 1
    fi
    # "Edit server.yaml as printed": the packaged file already says it.
    local key val differ=()
    while read -r key val; do
      grep -q "^ *$key $val\$" "$work/machines/$m/etc/plumbline/server.yaml" || differ+=("$key $val")
    done < <(grep -E '^ +[a-z_]+_file: /' "$work/logs/ca-init")
    if ((${#differ[@]})); then
      result ca-init FAIL "the packaged server.yaml lacks what ca init printed: ${differ[*]}"
    else
      result ca-init pass "the packaged server.yaml already names its files; $(run_in $m stat -c '%n %a %U:%G' /etc/plumbline/pki/ca.key /etc/plumbline/pki/server.key | tr '\n' ' ')"
    fi
  else
    # Not the production path: say so loudly, and go on with a stand-in
    # so that the rest can still be measured.
    ca_path="stand-in"
    result ca-init FAIL "plumbline-server has no 'ca init': PKI made with openssl instead (not the production path)"
    standin_pki "$work/machines/$m/etc/plumbline/pki" || return 1
  fi
  if ! out=$(run_in $m plumbline-server --config /etc/plumbline/server.yaml --config.check 2>&1); then
    result server-conf FAIL "the packaged server.yaml with ca init's files: $out"
    return 1
  fi
  say "$m: systemctl enable --now plumbline-server"
  run_in $m systemctl enable --now plumbline-server >/dev/null 2>&1
  if ! wait_for 60 api /readyz >/dev/null; then
    result server-start FAIL "not ready in 60 s: $(run_in $m journalctl -u plumbline-server -n 5 --no-pager 2>&1 | tail -3 | tr '\n' ' ')"
    return 1
  fi
  # The unit keeps the package's mode of /etc/plumbline (keys live there).
  local mode
  mode=$(stat -c %a "$work/machines/$m/etc/plumbline")
  [[ $mode == 750 ]] || result etc-mode FAIL "/etc/plumbline is $mode after the server started, want 750"
  out=$(run_in $m runuser -u plumbline -- plumbline-server token create --config /etc/plumbline/server.yaml --ttl 24h --uses 50 --labels role=postgres 2>&1) ||
    { result token FAIL "$out" && return 1; }
  join_token=$(awk '$1 == "token:" {print $2}' <<<"$out")
  ca_pin=$(awk '$1 == "ca-hash:" || $1 == "ca-pin:" {print $2}' <<<"$out")
  [[ -n $join_token && -n $ca_pin ]] || { result token FAIL "no token or pin in: $out" && return 1; }
  return 0
}

# standin_pki DIR: ca.crt, ca.key, server.crt, server.key as `ca init`
# would make them, with openssl on this machine (group plumbline may read).
standin_pki() {
  local d=$1 gid
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" \
    -subj "/CN=Plumbline enrollment CA" -days 3650 -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null || return 1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
    -subj "/CN=$server_fqdn" 2>/dev/null || return 1
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -out "$d/server.crt" -days 365 \
    -extfile <(printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$server_fqdn") 2>/dev/null || return 1
  rm -f "$d/server.csr"
  gid=$(stat -c %g "$d/..")
  chgrp "$gid" "$d/ca.key" "$d/server.key" && chmod 0640 "$d/ca.key" "$d/server.key"
}

# install_agent MACHINE HOSTNAME ROLE: dpkg -i; enroll as the agent's user
# into its state directory; the server address in agent.yaml (the only edit
# of the packaged file, plus the role's probes or window); --check;
# systemctl enable --now.
install_agent() {
  local m=$1 h=$2 role=$3 id_flag=() out pinflag=--ca-hash
  run_in "$m" dpkg -i "/root/debs/plumbline-agent_${v1}-1_${arch}.deb" >"$work/logs/$m.dpkg" 2>&1 ||
    { cat "$work/logs/$m.dpkg" >&2 && return 1; }
  # Two hosts named db2: the second enrolls under its own id.
  [[ $m == fb-db2b ]] && id_flag=(--agent-id db2-b)
  [[ $(run_in "$m" plumbline-agent enroll --help 2>&1) == *-ca-pin* ]] && pinflag=--ca-pin
  printf '%s\n' "$join_token" >"$work/machines/$m/var/lib/plumbline-agent/join.token"
  run_in "$m" chown plumbline: /var/lib/plumbline-agent/join.token
  run_in "$m" chmod 0600 /var/lib/plumbline-agent/join.token
  if ! out=$(run_in "$m" runuser -u plumbline -- plumbline-agent enroll --server "$server_fqdn:$grpc_port" \
    --token-file /var/lib/plumbline-agent/join.token "$pinflag" "$ca_pin" --dir /var/lib/plumbline-agent/tls "${id_flag[@]}" 2>&1); then
    result enroll FAIL "$m: $out"
    return 1
  fi
  run_in "$m" rm -f /var/lib/plumbline-agent/join.token
  local cfg=$work/machines/$m/etc/plumbline/agent.yaml
  sed -i "s#^  address: plumbline:7443#  address: $server_fqdn:$grpc_port#" "$cfg"
  case $role in
  probes | maint)
    # A probe directory on / (the only volume), writable by the unit.
    run_in "$m" install -d -o plumbline -g plumbline -m 0700 /var/lib/plumbline-probe
    run_in "$m" mkdir -p /etc/systemd/system/plumbline-agent.service.d
    printf '[Service]\nReadWritePaths=/var/lib/plumbline-probe\n' \
      >"$work/machines/$m/etc/systemd/system/plumbline-agent.service.d/probe.conf"
    printf '\nprobes:\n  - mount_point: /\n    dir: /var/lib/plumbline-probe\n    every: 1m\n    ops: 20\n    file_size: 64MiB\n    min_free: 64MiB\n' >>"$cfg"
    ;;
  esac
  if [[ $role == maint ]]; then
    # A window that always covers now: it starts every minute, lasts 2m.
    printf '\nmaintenance_windows:\n  - name: always\n    schedule: "* * * * *"\n    duration: 2m\n' >>"$cfg"
  fi
  if ! out=$(run_in "$m" plumbline-agent run --config /etc/plumbline/agent.yaml --check 2>&1); then
    result agent-conf FAIL "$m: $out"
    return 1
  fi
  run_in "$m" systemctl daemon-reload
  run_in "$m" systemctl enable --now plumbline-agent >/dev/null 2>&1
}
