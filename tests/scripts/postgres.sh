#!/usr/bin/env bash
# scripts/postgres: `up` starts a real PostgreSQL and prints its URI last,
# the server takes connections there and through `psql`, `down` leaves no
# process and no cluster behind, and --stop-with-parent stops the server
# once the process that started it has gone.
set -euo pipefail
source="${KPIPE_SOURCE_DIR:?}"
work=$(mktemp -d)
export KPIPE_POSTGRES_STATE=$work/state
pg="$source/scripts/postgres"
fail() {
  echo "FAIL: postgres: $*" >&2
  exit 1
}
trap '"$pg" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
# Running, not a zombie waiting for a parent that is not ours to reap it.
alive() { [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) =~ ^[^ZX]$ ]]; }

uri=$("$pg" up 2>"$work/up.err" | tail -1)
[[ $uri =~ ^postgresql://kpipe@127\.0\.0\.1:[0-9]+/postgres$ ]] || fail "up printed '$uri': $(cat "$work/up.err")"
[[ $("$pg" address) == "$uri" ]] || fail "address is not what up printed"
# A round trip through the URI, as kpipe's programs will connect: an upsert.
psql "$uri" -qAtv ON_ERROR_STOP=1 >"$work/out" <<'SQL'
CREATE TABLE t (k bigint PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'a') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
INSERT INTO t VALUES (1, 'b') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
SELECT k || '=' || v FROM t;
SQL
[[ $(cat "$work/out") == "1=b" ]] || fail "upsert gave '$(cat "$work/out")'"
[[ $("$pg" psql -Atc 'SHOW fsync') == off ]] || fail "fsync is not off for tests"
cluster=$(cat "$KPIPE_POSTGRES_STATE/cluster")
pid=$(head -1 "$cluster/data/postmaster.pid")
alive "$pid" || fail "no server process $pid"

"$pg" down
! alive "$pid" || fail "server $pid still runs after down"
[[ ! -e $cluster ]] || fail "down left $cluster"
if "$pg" address 2>"$work/err"; then fail "address answered with no server"; fi
grep -q "no server is running" "$work/err" || fail "address said: $(cat "$work/err")"

# --stop-with-parent: the server goes with the shell that ran up.
bash -c '"$1" up --stop-with-parent >/dev/null 2>&1' _ "$pg"
cluster=$(cat "$KPIPE_POSTGRES_STATE/cluster")
pid=$(head -1 "$cluster/data/postmaster.pid")
for _ in $(seq 300); do
  alive "$pid" || break
  sleep 0.1
done
! alive "$pid" || fail "server $pid outlived the process that started it"
echo "postgres: ok"
