#!/usr/bin/env bash
# Service checkpoints (issue #19), side by side with their baselines in one
# run, on a real PostgreSQL and a real Redis that the script starts (and
# stops at exit) as a user it makes:
#
#   checkpoint   `undoctl service checkpoint` of the cluster (a full copy:
#                the store holds no earlier point), against `cp -a` of its
#                data directory; and a second one after a one-row update
#                (files unchanged since the first are linked)
#   frozen       how long the server answered no one (from the point)
#   rollback     `undoctl service restore` (stop, checkpoint what is there,
#                put the data back, start, wait until it answers), against
#                `pg_ctl restart -m fast -w` (stop and start, nothing copied)
#
# for a fresh cluster and for pgbench data of growing scale (SCALES; scale
# 70 is about 2 GB), then for Redis (BGSAVE and the dump copied) against
# `redis-cli SAVE` + `cp` of the dump. Targets (fresh cluster, <= 50 MB):
# checkpoint <= 300 ms, rollback <= 2 s, frozen <= 100 ms. Medians of ROUNDS.
#
# Needs root, PostgreSQL (/usr/lib/postgresql/*/bin) and redis-server.
#
#   bench/service.sh                       fresh, scales 10 35 70; 5 rounds
#   SCALES="10" ROUNDS=3 bench/service.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
SCALES=${SCALES-10 35 70}
if [ "$(id -u)" != 0 ]; then
  echo "bench/service.sh: needs root (PostgreSQL runs as a user it makes)" >&2
  exit 2
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pgbin" ] || ! command -v redis-server >/dev/null; then
  echo "bench/service.sh: needs PostgreSQL and redis-server (apt-get install postgresql redis-server)" >&2
  exit 2
fi
go build -o bin/ ./cmd/undoctl
user=undosh-bench-svc
work=$(mktemp -d /var/tmp/undosh-bench-svc.XXXXXX)
chmod 755 "$work"
id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir "$work" "$user"
chown "$user" "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pgport=$(free_port)
redisport=$(free_port)
as() { runuser -u "$user" -- "$@"; }
pgstop() { [ -f "$work/data/postmaster.pid" ] && as "$pgbin/pg_ctl" -D "$work/data" stop -m immediate >/dev/null 2>&1 || true; }
cleanup() {
  pgstop
  redis-cli -p "$redisport" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
  userdel "$user" >/dev/null 2>&1 || true
}
trap cleanup EXIT
export UNDOSH_STATE_DIR=$work/state UNDOSH_POLICY=-
as "$pgbin/initdb" -A trust -U postgres -D "$work/data" >/dev/null
as "$pgbin/pg_ctl" -D "$work/data" -l "$work/pg.log" -w \
  -o "-p $pgport -k $work -c listen_addresses=127.0.0.1" start >/dev/null
psql() { command psql -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -Atq "$@"; }
psql -c "create table t(id int primary key, v text); insert into t values (1, 'one')"

now() { date +%s%N; }
ms() { echo "scale=1; ($2 - $1) / 1000000" | bc; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# field NAME: a number from the JSON point undoctl printed, in ms.
field() { python3 -c 'import json,sys; p=json.load(sys.stdin); v=p[sys.argv[1]]; print("%.1f" % (v/1e6) if sys.argv[1] in ("took","frozen") else v)' "$1"; }
service_name() { # the name undoctl gives the server on port $1
  bin/undoctl services --json | python3 -c 'import json,sys; print(next(s["name"] for s in json.load(sys.stdin)["services"] if s.get("port")==int(sys.argv[1])))' "$1"
}

echo "$(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}'), $(df -T "$work" | awk 'NR==2{print $2}') under $work"
printf '%-10s %9s | %9s %9s %6s | %9s %7s | %9s %9s %6s\n' "postgres" "data MB" "checkpt" "cp -a" "ratio" "2nd ckpt" "frozen" "rollback" "restart" "ratio"
run_pg() { # $1: label
  local name ck=() cp=() ck2=() fr=() rb=() rs=() mb
  name=$(service_name "$pgport")
  mb=$(du -sm "$work/data" | cut -f1)
  for r in $(seq "$ROUNDS"); do
    rm -rf "$UNDOSH_STATE_DIR/services"
    t0=$(now); cp -a "$work/data" "$work/cpa"; t1=$(now); rm -rf "$work/cpa"
    cp+=("$(ms "$t0" "$t1")")
    out=$(bin/undoctl service checkpoint --json "$name")
    ck+=("$(field took <<<"$out")") fr+=("$(field frozen <<<"$out")")
    id=$(field id <<<"$out")
    psql -c "update t set v = 'round $r' where id = 1"
    out2=$(bin/undoctl service checkpoint --json "$name")
    ck2+=("$(field took <<<"$out2")")
    psql -c "drop table t"
    t0=$(now); bin/undoctl service restore "$id" >/dev/null 2>&1; t1=$(now)
    rb+=("$(ms "$t0" "$t1")")
    [ "$(psql -c 'select v from t')" = "one" ] || [ "$r" -gt 1 ] || { echo "the restore did not bring table t back" >&2; exit 1; }
    psql -c "select 1 from t" >/dev/null || { echo "round $r: table t is not back after the restore" >&2; exit 1; }
    t0=$(now); as "$pgbin/pg_ctl" -D "$work/data" -w -m fast restart >/dev/null; t1=$(now)
    rs+=("$(ms "$t0" "$t1")")
  done
  local c p b s
  c=$(median "${ck[@]}") p=$(median "${cp[@]}") b=$(median "${rb[@]}") s=$(median "${rs[@]}")
  printf '%-10s %9s | %9s %9s %6s | %9s %7s | %9s %9s %6s\n' "$1" "$mb" "$c" "$p" "$(echo "scale=2; $c / $p" | bc)x" \
    "$(median "${ck2[@]}")" "$(median "${fr[@]}")" "$b" "$s" "$(echo "scale=2; $b / $s" | bc)x"
}
run_pg fresh
for s in $SCALES; do
  PGHOST=127.0.0.1 PGPORT=$pgport PGUSER=postgres pgbench -q -i -s "$s" postgres >/dev/null 2>&1
  psql -c "checkpoint"
  run_pg "scale $s"
done
echo "(ms; checkpt and rollback are what undoctl reports and the wall time of undoctl service restore, CLI start included)"

# Redis, with its dump growing.
mkdir -p "$work/redis" && chown "$user" "$work/redis"
as redis-server --port "$redisport" --bind 127.0.0.1 --dir "$work/redis" --save "" --appendonly no \
  --daemonize yes --logfile "$work/redis.log" --pidfile "$work/redis/redis.pid" --enable-debug-command local
for _ in $(seq 100); do redis-cli -p "$redisport" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
printf '\n%-10s %9s | %9s %9s %6s | %9s %7s | %9s\n' "redis" "keys" "checkpt" "save+cp" "ratio" "" "frozen" "rollback"
for keys in 10000 1000000; do
  [ "$(redis-cli -p "$redisport" debug populate "$keys")" = OK ] || { echo "redis: DEBUG POPULATE failed" >&2; exit 1; }
  name=$(service_name "$redisport")
  ck=() bs=() fr=() rb=()
  for r in $(seq "$ROUNDS"); do
    rm -rf "$UNDOSH_STATE_DIR/services"
    t0=$(now); redis-cli -p "$redisport" save >/dev/null; cp -a "$work/redis/dump.rdb" "$work/cpa.rdb"; t1=$(now); rm -f "$work/cpa.rdb"
    bs+=("$(ms "$t0" "$t1")")
    out=$(bin/undoctl service checkpoint --json "$name")
    ck+=("$(field took <<<"$out")") fr+=("$(field frozen <<<"$out")")
    id=$(field id <<<"$out")
    redis-cli -p "$redisport" flushall >/dev/null
    t0=$(now); bin/undoctl service restore "$id" >/dev/null 2>&1; t1=$(now)
    rb+=("$(ms "$t0" "$t1")")
    [ "$(redis-cli -p "$redisport" dbsize)" -ge "$keys" ] || { echo "round $r: the keys are not back after the restore" >&2; exit 1; }
  done
  c=$(median "${ck[@]}") b=$(median "${bs[@]}")
  printf '%-10s %9s | %9s %9s %6s | %9s %7s | %9s\n' "" "$keys" "$c" "$b" "$(echo "scale=2; $c / $b" | bc)x" "" "$(median "${fr[@]}")" "$(median "${rb[@]}")"
done
redis-cli -p "$redisport" shutdown nosave >/dev/null 2>&1 || true
