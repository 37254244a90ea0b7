#!/usr/bin/env bash
# What checkpoints cost: kconsume | kwindow over 1M events on kbroker, with
# and without --state (a 1 s interval, kcheckpoint commit at the end).
# Prints the median wall time of RUNS runs of each and the ratio.
#
#   bench/checkpoint.sh [RECORDS] [RUNS]
#
# INTERVAL=200ms sets another --checkpoint-interval (default 1s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-5}
interval=${INTERVAL:-1s}
bin=${KPIPE_BIN:-$root/build/bin}
export PATH="$bin:$PATH"
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/lib.sh"

start_kbroker bench:64
# 1M events, 10k users, 10 ms apart: about 2.8 hours of event time.
"$root/scripts/gen-events" -n "$records" -k 10000 -i 10 -j 2000 >"$work/events.ndjson"
kproduce -b "$B" -t bench -k .event_id "$work/events.ndjson"

window=(--time .value.ts --key .value.user_id --tumble 5m --watermark 5s --agg count --agg sum:.value.amount)
plain() { kconsume -b "$B" -t bench -e --announce | kwindow "${window[@]}" >/dev/null; }
stateful() {
  rm -f "$work"/s.db*
  kconsume -b "$B" -t bench -e --state "$work/s.db" --checkpoint-interval "$interval" |
    kwindow "${window[@]}" --state "$work/s.db" --flush-at-end |
    kcheckpoint commit --state "$work/s.db" >/dev/null
}
median() {
  local fn=$1 i
  for i in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$fn"
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
  done | sort -n | sed -n "$(((runs + 1) / 2))p"
}
a=$(median plain)
b=$(median stateful)
checkpoints=$(sqlite3 "$work/s.db" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL")
printf 'without --state  %6.2f s  %9.0f events/s\n' "$a" "$(echo "$records / $a" | bc -l)"
printf 'with --state     %6.2f s  %9.0f events/s  (%s checkpoints, every %s)\n' "$b" "$(echo "$records / $b" | bc -l)" "$checkpoints" "$interval"
printf 'ratio            %6.1f %%\n' "$(echo "100 * $a / $b" | bc -l)"
