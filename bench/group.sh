#!/usr/bin/env bash
# One pipeline on many machines (issue 19, kpipe(7) MANY INSTANCES): what
# keeping state per partition costs, and what a rebalance costs the
# partitions that move.
#
# 1. Speed, on kbroker: the README's pipeline (kconsume | kdedup | kwindow
#    | kupsert, all with --state, checkpoints every second) over 1M events
#    of 1,000 users on 64 partitions (kbroker keeps about 5 MiB of each),
#    as one pipeline (kconsume --state)
#    and as an instance of a group (kconsume -g --state: an engine per
#    partition in kdedup and kwindow, claims and epochs in the store).
# 2. The pause, on a real Apache Kafka (the one scripts/kafka runs with
#    KPIPE_KAFKA_STATE, else one started here), 12 partitions: two
#    instances read a backlog of the same events; a third joins. For each
#    partition that moves: from the moment its old owner began handing it
#    over (its checkpoint, then the wait for the terminal stage, kconsume
#    -v's "handing N partitions over at checkpoint C took T ms") to its new
#    owner's "assigned" line, and to the new owner's kwindow having
#    restored its windows.
#
#   bench/group.sh [RECORDS] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-3}
bin=${KPIPE_BIN:-$root/build/bin}
work=$(mktemp -d)
tmp=$work
export KPIPE_KAFKA_STATE=${KPIPE_KAFKA_STATE:-$work/kafka} KPIPE_BIN=$bin KPIPE_SOURCE_DIR=$root
export PATH=$bin:$PATH
own_kafka=false
broker=""
cleanup() {
  pkill -f "kconsume -b .* -g bench-" 2>/dev/null || true
  [[ -z "$broker" ]] || kill "$broker" 2>/dev/null || true
  if $own_kafka; then "$root/scripts/kafka" down >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
source "$root/bench/lib.sh"
bench_header

"$root/scripts/gen-events" -n "$records" -k 1000 -r 0.03 -j 2000 -s 19 >"$work/events.ndjson"

# --- 1. speed -------------------------------------------------------------------
# (BENCH_PAUSE_ONLY=1 skips it.)
if [[ "${BENCH_PAUSE_ONLY:-}" != 1 ]]; then
start_kbroker bench:64
kproduce -b "$B" -t bench -k .user_id "$work/events.ndjson"
# pipeline STATE [KCONSUME ARGS...]: the README's pipeline to the end of the topic.
pipeline() {
  local s=$1
  shift
  kconsume -b "$B" -t bench -e --state "$s" --checkpoint-interval 1s "$@" |
    kdedup -k .value.event_id --state "$s" |
    kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
      --agg sum:.value.amount --time-format ms --state "$s" --flush-at-end |
    kupsert --db "$s" --table clicks --key window_start,key --state "$s"
}
n=0
PREPARE='rm -f "$work"/p.db*; n=$((n + 1))'
timed "one pipeline (kconsume --state)" "$records" bash -c "$(declare -f pipeline); B=$B; pipeline $work/p.db"
rows_single=$(sqlite3 "$work/p.db" "SELECT COUNT(*) FROM clicks")
PREPARE='rm -f "$work"/p.db*; n=$((n + 1))'
timed "an instance (kconsume -g --state)" "$records" bash -c "$(declare -f pipeline); B=$B; pipeline $work/p.db -g bench-speed-\$RANDOM"
rows_instance=$(sqlite3 "$work/p.db" "SELECT COUNT(*) FROM clicks")
unset PREPARE
# What of an instance's time is its group's join (kbroker holds a group's
# first join for 3 s, as Kafka's group.initial.rebalance.delay.ms does).
timed "the group join alone (-c 1)" 1 bash -c "kconsume -b $B -t bench -c 1 -g bench-join-\$RANDOM >/dev/null"
echo "# windows: one pipeline $rows_single, an instance $rows_instance"
[[ "$rows_single" == "$rows_instance" ]] || echo "# MISMATCH: the two tables differ in size"
kill "$broker"
broker=""
fi

# --- 2. the pause of the partitions that move --------------------------------------
if ! K=$("$root/scripts/kafka" address 2>/dev/null); then
  "$root/scripts/kafka" up >"$work/kafka.log" 2>&1 || { cat "$work/kafka.log" >&2; exit 1; }
  own_kafka=true
  K=$("$root/scripts/kafka" address)
fi
topic=bench-group-$$
"$root/scripts/kafka" topic "$topic" 12 >/dev/null
kproduce -b "$K" -t "$topic" -k .user_id "$work/events.ndjson"
S=$work/g.db
# stamp FILE: each line of standard input, after the time it was read.
stamp() { while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done >"$1"; }
instance() {
  local name=$1
  kconsume -b "$K" -t "$topic" -g "bench-$topic" --state "$S" --checkpoint-interval 1s -v 2> >(stamp "$work/$name.consume") |
    kdedup -k .value.event_id --state "$S" |
    kwindow -v --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
      --time-format ms --state "$S" 2> >(stamp "$work/$name.window") |
    kupsert --db "$S" --table clicks --key window_start,key --state "$S" >/dev/null
}
instance a &
instance b &
owned_by_two() { (($(sqlite3 "$S" "SELECT COUNT(DISTINCT pid) FROM partition_owners" 2>/dev/null || echo 0) == 2)); }
until owned_by_two; do sleep 0.1; done # polling the store: nothing to wait on
echo "$EPOCHREALTIME" >"$work/c.started"
instance c &
joined() { grep -q 'assigned' "$work/c.consume" 2>/dev/null && grep -q 'restored' "$work/c.window" 2>/dev/null; }
for _ in $(seq 600); do joined && break; sleep 0.1; done
sleep 2 # the last restores' lines
pkill -TERM -f "kconsume -b $K -t $topic" || true
wait || true
# The moves: the old owners' hand-over lines, the new owner's assigned and
# restored lines.
awk -v since="$(cat "$work/c.started")" '
  FILENAME ~ /\.consume$/ && $1 >= since && / handing [0-9]+ partitions over at checkpoint [0-9]+ took [0-9]+ ms/ {
    for (i = 1; i <= NF; ++i) if ($i == "took") took = $(i + 1)
    start = $1 - took / 1000
    if (first == "" || start < first) first = start
    handed += $4
  }
  FILENAME ~ /c\.consume$/ && / assigned / { assigned[$4 $5] = $1 }
  FILENAME ~ /c\.window$/ && / restored / { restored[$6 $7] = $1 }
  END {
    if (first == "") { print "# no partitions were handed over"; exit }
    n = 0
    for (p in assigned) {
      a = assigned[p] - first; n++
      if (amax == "" || a > amax) amax = a
      if (p in restored) { r = restored[p] - first; if (rmax == "" || r > rmax) rmax = r }
    }
    printf "# rebalance on a third instance: %d partitions handed over, %d assigned to it;\n", handed, n
    printf "#   from the first hand-over to the last assigned: %.0f ms; to the last restored window state: %.0f ms\n", amax * 1000, rmax * 1000
  }' "$work"/a.consume "$work"/b.consume "$work"/c.consume "$work"/c.window
awk -v since="$(cat "$work/c.started")" '$1 >= since && /handing|assigned|revoked/ { printf "#   %+6.0f ms %s\n", ($1 - since) * 1000, substr($0, index($0, " ") + 1) }' \
  "$work"/a.consume "$work"/b.consume "$work"/c.consume | sort -k2,2n
