#!/usr/bin/env bash
# klag's budget: one sample of a group over 1,000 partitions in under 1 s
# against kbroker. Every partition lags, so that each sample also reads one
# record per partition for the lag in seconds.
#
#   bench/lag.sh [BUILD_DIR]    (default: build)
#
# Prints the wall time of each of RUNS samples (default 10) with the record
# fetch, then with --no-fetch, and the median of each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build}/bin" && pwd)
parts=${PARTS:-1000}
records=${RECORDS:-100000}
runs=${RUNS:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-bench-lag.XXXXXX")
broker=""
cleanup() {
  [[ -n "$broker" ]] && kill "$broker" 2>/dev/null && wait "$broker" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

mkfifo "$work/kbroker.out"
"$bin/kbroker" --topic "bench:$parts" >"$work/kbroker.out" 2>/dev/null &
broker=$!
exec 9<"$work/kbroker.out"
read -r -t 30 brokers <&9
cat <&9 >/dev/null &

echo "producing $records records over $parts partitions" >&2
"$root/scripts/gen-events" -n "$records" -k 100000 | "$bin/kproduce" -b "$brokers" -t bench -k .event_id
# A group that has read about half of it: kconsume commits exactly what
# it wrote.
"$bin/kconsume" -b "$brokers" -t bench -g bench-group -c $((records / 2)) >/dev/null
"$bin/klag" -b "$brokers" -g bench-group --format ndjson >"$work/sample.ndjson"
lagging=$(jq -s '[.[] | select(.partition != null and .lag > 0)] | length' "$work/sample.ndjson")
echo "partitions: $(jq -s '[.[] | select(.partition != null)] | length' "$work/sample.ndjson"), lagging: $lagging" >&2

measure() {
  local label=$1
  shift
  local times=() i start end
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    "$bin/klag" -b "$brokers" -g bench-group --format ndjson -q "$@" >/dev/null
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
  done
  printf '%s: %s ms; median %s ms\n' "$label" "${times[*]}" \
    "$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
}
measure "one sample, reading a record per partition"
measure "one sample, --no-fetch with a history" --no-fetch --history "$work/history.db"
