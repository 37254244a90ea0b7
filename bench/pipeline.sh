#!/usr/bin/env bash
# The README's pipeline as a whole, plain and exactly once (issue 16):
#
#   kconsume | kdlq guard | kdedup | kwindow | kupsert
#
# over 1M events (1,000 users, 5% repeats) produced keyed by user to a
# kbroker topic of 64 partitions. The plain pipeline runs without --state
# (kconsume -e --announce); the exactly-once one gives every stage --state
# with 1 s checkpoints. For each, RUNS runs (default 3), alternating with
# the other's: the median wall time and rate, and from the median run each
# stage's CPU time and peak memory; then the ratio, and the exactly-once
# run's checkpoints (count and barrier-to-completion time). Both pipelines
# must leave the same table.
#
#   bench/pipeline.sh [RECORDS] [RUNS]
#
# And: `PG=1 bench/pipeline.sh` runs the exactly-once pipeline with its
# stores in PostgreSQL against the same on SQLite files (issue 17).
# Also: `DEDUP=1 bench/pipeline.sh` times kdedup alone on 1M distinct keys
# (issue 16's second target): `kconsume --state | kdedup --state |
# kcheckpoint commit` against `kconsume -e --announce | kdedup` (the issue's
# comparison), then against the same stateful pipeline with kdedup alone
# run without --state (kdedup's own share).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-3}
interval=${INTERVAL:-1s}
bin=${KPIPE_BIN:-$root/build/bin}
export PATH="$bin:$PATH"
command -v sqlite3 >/dev/null || { echo "bench/pipeline.sh: needs the sqlite3 shell" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/lib.sh"
bench_header

start_kbroker bench:64 distinct:64
"$root/scripts/gen-events" -n "$records" -k 1000 -r 0.05 >"$work/events.ndjson"
kproduce -b "$B" -t bench -k .user_id "$work/events.ndjson"
got=$(kconsume -b "$B" -t bench -e --format value | wc -l)
[[ $got == "$records" ]] || { echo "bench/pipeline.sh: kbroker kept $got of $records records" >&2; exit 1; }

# stage NAME CMD...: runs CMD, its CPU time and peak RSS to $work/t.NAME.
stage() {
  local name=$1
  shift
  /usr/bin/time -o "$work/t.$name" -f "%U %S %M" "$@"
}
guard=(--require .value.user_id:string --require .value.ts:time)
window=(--time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count --agg amount=sum:.value.amount)

plain() {
  rm -f "$work"/plain.db* "$work"/dead.db*
  stage kconsume kconsume -b "$B" -t bench -e --announce |
    stage guard kdlq guard "${guard[@]}" --dlq "$work/dead.db" |
    stage kdedup kdedup --key .value.event_id |
    stage kwindow kwindow "${window[@]}" |
    stage kupsert kupsert --db "$work/plain.db" --table clicks --key window_start,key
}
exactly_once() {
  rm -f "$work"/eo.db* "$work"/dead.db*
  stage kconsume kconsume -b "$B" -t bench -e --state "$work/eo.db" --checkpoint-interval "$interval" |
    stage guard kdlq guard "${guard[@]}" --dlq "$work/dead.db" |
    stage kdedup kdedup --key .value.event_id --state "$work/eo.db" |
    stage kwindow kwindow "${window[@]}" --state "$work/eo.db" --flush-at-end |
    stage kupsert kupsert --db "$work/eo.db" --table clicks --key window_start,key --state "$work/eo.db"
}

# measure NAME STAGES...: one run of pipeline NAME, its wall time and its
# stages' CPU times and peak memory appended to $work/runs.NAME.
measure() {
  local fn=$1
  shift
  local t0 t1 line s
  t0=$(date +%s.%N)
  "$fn" >/dev/null
  t1=$(date +%s.%N)
  line="$(echo "$t1 - $t0" | bc)"
  for s in "$@"; do line+=" $(awk '{ printf "%s:%.2f:%d", "'"$s"'", $1 + $2, $3 / 1024 }' "$work/t.$s")"; done
  echo "$line" >>"$work/runs.$fn"
}

# report NAME: the median run's wall time and rate, its stages' CPU times
# and peak memory.
report() {
  local fn=$1
  sort -n -o "$work/runs.$fn" "$work/runs.$fn"
  local median
  median=$(sed -n "$(((runs + 1) / 2))p" "$work/runs.$fn")
  local wall=${median%% *}
  printf '%-13s %6.2f s  %7.0f events/s  (median of %d; best %.2f s)\n' "$fn" "$wall" \
    "$(echo "$records / $wall" | bc -l)" "$runs" "$(head -1 "$work/runs.$fn" | cut -d' ' -f1)"
  local cpu_total=0 part s cpu mb
  for part in ${median#* }; do
    IFS=: read -r s cpu mb <<<"$part"
    printf '    %-9s cpu %5.2f s  peak %4d MB\n' "$s" "$cpu" "$mb"
    cpu_total=$(echo "$cpu_total + $cpu" | bc)
  done
  printf '    %-9s cpu %5.2f s\n' total "$cpu_total"
  echo "$wall" >"$work/wall.$fn"
}

# compare A B STAGES...: RUNS runs of each, alternating, so that a machine
# that slows down meanwhile slows both alike; then both reports and the ratio.
compare() {
  local a=$1 b=$2
  shift 2
  local i
  for ((i = 0; i < runs; i++)); do
    measure "$a" "$@"
    measure "$b" "$@"
  done
  report "$a"
  report "$b"
  printf 'ratio         %6.1f %%  (%s against %s, by wall time)\n' \
    "$(echo "100 * $(cat "$work/wall.$a") / $(cat "$work/wall.$b")" | bc -l)" "$b" "$a"
}

compare plain exactly_once kconsume guard kdedup kwindow kupsert

# The two tables must agree: the same windows, the same counts and sums.
q='SELECT key, window_start, count, amount FROM clicks ORDER BY key, window_start'
if ! cmp -s <(sqlite3 "$work/plain.db" "$q") <(sqlite3 "$work/eo.db" "$q"); then
  echo "bench/pipeline.sh: the two pipelines' tables differ" >&2
  exit 1
fi
echo "tables        equal: $(sqlite3 "$work/eo.db" 'SELECT COUNT(*) FROM clicks') rows"
sqlite3 "$work/eo.db" "SELECT COUNT(*), MIN(completed_at - emitted_at), MAX(completed_at - emitted_at),
  CAST(AVG(completed_at - emitted_at) AS INTEGER) FROM checkpoints WHERE completed_at IS NOT NULL" |
  awk -F'|' '{ printf "checkpoints   %d complete; barrier to completion min %d ms, mean %d ms, max %d ms\n", $1, $2, $4, $3 }'

if [[ ${DEDUP:-0} == 1 ]]; then
  # kdedup alone: 1M distinct keys (each event once), 1 s checkpoints.
  "$root/scripts/gen-events" -n "$records" -k 1000 >"$work/distinct.ndjson"
  kproduce -b "$B" -t distinct -k .user_id "$work/distinct.ndjson"
  dedup_plain() {
    kconsume -b "$B" -t distinct -e --announce | stage kdedup kdedup --key .value.event_id >/dev/null
  }
  dedup_state() {
    rm -f "$work"/d.db*
    kconsume -b "$B" -t distinct -e --state "$work/d.db" --checkpoint-interval "$interval" |
      stage kdedup kdedup --key .value.event_id --state "$work/d.db" |
      kcheckpoint commit --state "$work/d.db" >/dev/null
  }
  compare dedup_plain dedup_state kdedup
  # kdedup's own share: the same pipeline around it (kconsume --state and
  # kcheckpoint commit), kdedup without --state passing the checkpoints on.
  dedup_around() {
    rm -f "$work"/d.db*
    kconsume -b "$B" -t distinct -e --state "$work/d.db" --checkpoint-interval "$interval" |
      stage kdedup kdedup --key .value.event_id |
      kcheckpoint commit --state "$work/d.db" >/dev/null
  }
  rm -f "$work"/runs.dedup_state
  compare dedup_around dedup_state kdedup
fi

if [[ ${PG:-0} == 1 ]]; then
  # Issue 17: the exactly-once pipeline with its state, dead letters and
  # table in PostgreSQL (a server of its own, scripts/postgres: loopback,
  # fsync off) against the same pipeline on SQLite files. A fresh database
  # for each run.
  export KPIPE_POSTGRES_STATE=$work/postgres
  server=$("$root/scripts/postgres" up 2>"$work/postgres.err" | tail -1) ||
    { echo "bench/pipeline.sh: scripts/postgres up failed: $(cat "$work/postgres.err")" >&2; exit 1; }
  trap '"$root/scripts/postgres" down >/dev/null 2>&1; kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
  pg="${server%/*}/bench"
  exactly_once_pg() {
    psql -XAtq "$server" -c "DROP DATABASE IF EXISTS bench" -c "CREATE DATABASE bench"
    stage kconsume kconsume -b "$B" -t bench -e --state "$pg" --checkpoint-interval "$interval" |
      stage guard kdlq guard "${guard[@]}" --dlq "$pg" |
      stage kdedup kdedup --key .value.event_id --state "$pg" |
      stage kwindow kwindow "${window[@]}" --state "$pg" --flush-at-end |
      stage kupsert kupsert --db "$pg" --table clicks --key window_start,key --state "$pg"
  }
  rm -f "$work"/runs.exactly_once
  compare exactly_once exactly_once_pg kconsume guard kdedup kwindow kupsert
  if ! cmp -s <(sqlite3 "$work/eo.db" "$q" | sed 's/\.0|/|/g') <(psql -XAtq -F'|' "$pg" -c "$q"); then
    echo "bench/pipeline.sh: the SQLite and PostgreSQL tables differ" >&2
    exit 1
  fi
  echo "tables        equal on SQLite and PostgreSQL: $(psql -XAtq "$pg" -c 'SELECT COUNT(*) FROM clicks') rows"
  psql -XAtq -F'|' "$pg" -c "SELECT COUNT(*), MIN(completed_at - emitted_at), MAX(completed_at - emitted_at),
    CAST(AVG(completed_at - emitted_at) AS BIGINT) FROM checkpoints WHERE completed_at IS NOT NULL" |
    awk -F'|' '{ printf "checkpoints   %d complete on PostgreSQL; barrier to completion min %d ms, mean %d ms, max %d ms\n", $1, $2, $4, $3 }'
fi
