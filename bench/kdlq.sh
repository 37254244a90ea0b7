#!/usr/bin/env bash
# kdlq's benchmark (issue 8), run by hand, never by ctest:
#
#   bench/kdlq.sh [BUILD_DIR]     (default: build)
#
# - guard: rate on 2M good lines (scripts/gen-events) with three typed
#   requirements, against cat (the I/O floor) and jq doing the same checks
#   (on 200k lines: jq is slow);
# - dead letters: 200k lines that all fail, written to an SQLite store and
#   to a Kafka topic on kbroker;
# - the store: list and stats over those 200k entries;
# - replay of the 200k entries to standard output (each entry marked as its
#   write returns) and to a topic on kbroker (batches of 1000).
#
# Each timed run is repeated (RUNS, default 3); best and median wall clock
# and CPU (user + sys) are printed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
bin=$build/bin
gen=$here/scripts/gen-events
runs=${RUNS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kdlq-bench.XXXXXX")
broker_pid=""
trap '[[ -n $broker_pid ]] && kill $broker_pid; rm -rf "$tmp"' EXIT
[[ -x $bin/kdlq ]] || { echo "no $bin/kdlq: build first" >&2; exit 1; }

source "$here/bench/lib.sh"
bench_header

lines=2000000
"$gen" -n $lines -k 10000 >"$tmp/events.ndjson"
echo "# input: $lines lines, $(du -m "$tmp/events.ndjson" | cut -f1) MB"
require=(--require .user_id:string --require .ts:time --require .amount:integer)

echo "## guard"
timed "cat" $lines cat "$tmp/events.ndjson"
timed "kdlq guard (3 typed fields)" $lines "$bin/kdlq" guard "${require[@]}" "$tmp/events.ndjson"
cmp -s "$tmp/out" "$tmp/events.ndjson" || { echo "guard changed good lines" >&2; exit 1; }
head -200000 "$tmp/events.ndjson" >"$tmp/events200k.ndjson"
timed "jq (same checks, 200k lines)" 200000 jq -c \
  'select((.user_id | type) == "string" and (.ts | type) == "number" and (.amount | type) == "number" and
          (.amount | floor) == .amount)' "$tmp/events200k.ndjson"

echo "## dead letters (200k lines, all bad)"
bad=200000
"$gen" -n $bad -k 10000 -s 2 >"$tmp/bad.ndjson"
PREPARE="rm -f $tmp/bad.db $tmp/bad.db-wal $tmp/bad.db-shm" timed "guard --dlq FILE.db" $bad \
  "$bin/kdlq" guard --require .missing --dlq "$tmp/bad.db" "$tmp/bad.ndjson"
echo "# store: $(du -m "$tmp/bad.db" | cut -f1) MB for $bad entries"

mkfifo "$tmp/bs"
"$bin/kbroker" --topic dlq:4 --topic fixed:4 >"$tmp/bs" 2>/dev/null &
broker_pid=$!
read -r brokers <"$tmp/bs"
cat "$tmp/bs" >/dev/null &
runs_saved=$runs
runs=1  # the topic keeps every run's records
timed "guard --dlq kafka:TOPIC (kbroker)" $bad \
  "$bin/kdlq" guard --require .missing --dlq kafka:dlq -b "$brokers" "$tmp/bad.ndjson"
runs=$runs_saved

echo "## reading the store (200k entries)"
timed "list --format ndjson" $bad "$bin/kdlq" list --dlq "$tmp/bad.db" --format ndjson
timed "stats" $bad "$bin/kdlq" stats --dlq "$tmp/bad.db"
timed "list --format ndjson (kafka)" $bad "$bin/kdlq" list --dlq kafka:dlq -b "$brokers" --format ndjson

echo "## replay (200k entries)"
PREPARE="'$bin/kdlq' purge --dlq '$tmp/bad.db' --older-than 0s >/dev/null; \
  '$bin/kdlq' guard --require .missing --dlq '$tmp/bad.db' '$tmp/bad.ndjson' 2>/dev/null" \
  timed "replay to stdout" $bad "$bin/kdlq" replay --dlq "$tmp/bad.db"
cmp -s "$tmp/out" "$tmp/bad.ndjson" || { echo "replay changed lines" >&2; exit 1; }
runs=1
timed "replay --to kafka (kbroker)" $bad "$bin/kdlq" replay --dlq "$tmp/bad.db" --again --to kafka:fixed -b "$brokers"
timed "replay kafka DLQ --to kafka" $bad "$bin/kdlq" replay --dlq kafka:dlq -b "$brokers" --to kafka:fixed
