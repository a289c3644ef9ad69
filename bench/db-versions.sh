#!/usr/bin/env bash
# db-versions.sh — the agent's database collector against the releases the
# host does not package: PostgreSQL 18 (pg_stat_io with byte columns and its
# wal object, no pg_stat_wal timing) and MySQL 9 (performance_schema with
# the InnoDB redo log instrumented), both from a Debian sid root made with
# debootstrap and run under chroot. As root:
#
#   sudo bench/db-versions.sh
#
# 1. Builds (or reuses) ROOT: debootstrap minbase sid + postgresql-18,
#    mysql-server-core; the mirror's Release file may be past its
#    Valid-Until, which apt is told to accept.
# 2. Starts PostgreSQL 18 (trust on 127.0.0.1:PG_PORT, track_io_timing and
#    track_wal_io_timing on) and MySQL 9 (socket in the host's /tmp, bind
#    mounted into the root), with a monitoring role on each.
# 3. Runs the collector's PostgreSQL tests against PostgreSQL 18
#    (PLUMBLINE_TEST_POSTGRES_DSN / _ROOT): every interval's deltas against
#    the views' own, over TCP and the socket.
# 4. Runs `agent databases` on both with a light write load, placing each
#    location through the root (`root:`), and prints what it would send.
# 5. Stops both (KEEP=1 leaves them running).
#
# Needs: root, debootstrap, go, psql and mysql clients on the host.
#   ROOT      the sid root (default /var/tmp/plumbline-dbversions/root)
#   MIRROR    the Debian mirror (default http://deb.debian.org/debian)
#   PG_PORT   PostgreSQL 18's port (default 55418)
{
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-/var/tmp/plumbline-dbversions/root}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PG_PORT=${PG_PORT:-55418}
KEEP=${KEEP:-0}
work=$(dirname "$ROOT")
say() { printf '==> %s\n' "$*" >&2; }
apt_in() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  apt-get -o Acquire::Check-Valid-Until=false -q "$@"; }

mkdir -p "$work"
if [[ ! -x $ROOT/usr/lib/postgresql/18/bin/postgres || ! -x $ROOT/usr/sbin/mysqld ]]; then
  say "1. debootstrap sid into $ROOT (about 2 minutes)"
  [[ -x $ROOT/usr/bin/apt-get ]] || debootstrap --variant=minbase sid "$ROOT" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  mkdir -p "$ROOT/etc/postgresql-common"
  echo 'create_main_cluster = false' >"$ROOT/etc/postgresql-common/createcluster.conf"
  apt_in update >>"$work/debootstrap.log" 2>&1
  apt_in install -y --no-install-recommends postgresql-18 mysql-server-core >>"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
fi

mounted=()
cleanup() {
  if [[ $KEEP != 1 ]]; then
    chroot "$ROOT" su postgres -s /bin/sh -c "/usr/lib/postgresql/18/bin/pg_ctl -D /srv/pg18/data -m fast -w stop" >/dev/null 2>&1 || true
    [[ -s $ROOT/srv/my9/mysqld.pid ]] && kill "$(cat "$ROOT/srv/my9/mysqld.pid")" 2>/dev/null || true
    sleep 3
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
  fi
}
trap cleanup EXIT
mountpoint -q "$ROOT/proc" || { mount -t proc proc "$ROOT/proc"; mounted+=("$ROOT/proc"); }
mountpoint -q "$ROOT/tmp" || { mount --bind /tmp "$ROOT/tmp"; mounted+=("$ROOT/tmp"); }

say "2. PostgreSQL 18 on 127.0.0.1:$PG_PORT and MySQL 9 on /tmp/plumbline-my9.sock"
rm -rf "$ROOT/srv/pg18" "$ROOT/srv/my9"
mkdir -p "$ROOT/srv/pg18" "$ROOT/srv/my9"
chroot "$ROOT" sh -c 'id mysql >/dev/null 2>&1 || { groupadd -r mysql && useradd -r -g mysql -d /srv/my9 mysql; }'
chroot "$ROOT" chown postgres:postgres /srv/pg18
chroot "$ROOT" chown mysql:mysql /srv/my9
chroot "$ROOT" su postgres -s /bin/sh -c "/usr/lib/postgresql/18/bin/initdb -D /srv/pg18/data --auth=trust -U postgres" >/dev/null
cat >>"$ROOT/srv/pg18/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '/tmp'
track_io_timing = on
track_wal_io_timing = on
shared_buffers = 32MB
CONF
chroot "$ROOT" su postgres -s /bin/sh -c "/usr/lib/postgresql/18/bin/pg_ctl -D /srv/pg18/data -l /srv/pg18/log -w start" >/dev/null
chroot "$ROOT" /usr/sbin/mysqld --no-defaults --initialize-insecure --datadir=/srv/my9/data --user=mysql >"$work/my9-init.log" 2>&1
setsid chroot "$ROOT" /usr/sbin/mysqld --no-defaults --datadir=/srv/my9/data --user=mysql --socket=/tmp/plumbline-my9.sock \
  --skip-networking --performance-schema=ON --log-error=/srv/my9/error.log --pid-file=/srv/my9/mysqld.pid \
  --innodb-buffer-pool-size=16M --secure-file-priv= </dev/null >/dev/null 2>&1 &
for _ in $(seq 60); do [[ -S /tmp/plumbline-my9.sock ]] && break; sleep 1; done
[[ -S /tmp/plumbline-my9.sock ]] || { tail -20 "$ROOT/srv/my9/error.log" >&2; exit 1; }
pg="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
my() { mysql -S /tmp/plumbline-my9.sock -uroot "$@"; }
psql -Atq "$pg" -c "SELECT version()" >&2
my -Nse "SELECT CONCAT('MySQL ', version())" >&2
psql -q "$pg" -c "CREATE ROLE plumbline LOGIN PASSWORD 'secret' IN ROLE pg_monitor" -c "CREATE TABLE t (i int, p text)"
my -e "CREATE USER 'plumbline'@'localhost' IDENTIFIED BY 'secret'; GRANT PROCESS ON *.* TO 'plumbline'@'localhost';
  GRANT SELECT ON performance_schema.* TO 'plumbline'@'localhost'; CREATE DATABASE io;
  CREATE TABLE io.t (id INT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(500)) ENGINE=InnoDB"

say "3. the collector's PostgreSQL tests against PostgreSQL 18"
PLUMBLINE_TEST_POSTGRES_DSN=$pg PLUMBLINE_TEST_POSTGRES_ROOT=$ROOT \
  go test -count=1 -run 'TestPostgres' -v ./internal/agent/dbio/ 2>&1 | grep -E '^(---|    ---|ok|FAIL|PASS)'
psql -q "$pg" -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null # the tests switch timing off and on

say "4. agent databases on both, 10 s under a light write load"
cfg=$work/agent.yaml pw=$work/password
echo secret >"$pw" && chmod 600 "$pw"
cat >"$cfg" <<CONF
databases:
  - {name: pg18, engine: postgresql, address: "127.0.0.1:$PG_PORT", database: postgres, user: plumbline, password_file: $pw, root: $ROOT}
  - {name: my9, engine: mysql, address: /tmp/plumbline-my9.sock, user: plumbline, password_file: $pw, root: $ROOT}
CONF
go build -o "$work/agent" ./cmd/agent
"$work/agent" databases --config "$cfg" --wait 10s >"$work/databases.txt" 2>&1 &
check=$!
end=$((SECONDS + 12))
while ((SECONDS < end)); do
  psql -q "$pg" -c "INSERT INTO t SELECT g, repeat('y', 200) FROM generate_series(1, 2000) g" -c "SELECT count(*) FROM t" >/dev/null
  my -e "INSERT INTO io.t (pad) VALUES (REPEAT('x', 500))"
done
status=0
wait "$check" || status=$?
cat "$work/databases.txt"
exit "$status"
}
