#!/usr/bin/env bash
# A replay killed with SIGKILL at a random moment, twice, then run to the
# end, delivers every entry exactly once: from a store (an SQLite file or
# a PostgreSQL database) and from a Kafka dead-letter topic, to a topic.
# The kill is synchronised with the consuming side, not with a sleep:
# kconsume -c K returns once K replayed records exist, and the replay dies
# right then, usually mid-batch.
# To standard output, where no reader can say what it received, a kill
# loses nothing and repeats at most the one line being marked.
source "$(dirname "$0")/lib.sh"
start_broker dlq:3 fixed-store:3 fixed-topic:3
N=3000
DLQ=$(topic dlq)
# The dead-letter store: an SQLite file or a PostgreSQL database (lib.sh).
BAD=$(store bad)

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 500 >"$WORK/events.ndjson"
kdlq guard --require .missing --dlq "$BAD" <"$WORK/events.ndjson" >/dev/null 2>"$WORK/guard.err" ||
  fail "kdlq guard --dlq $BAD failed: $(tail -3 "$WORK/guard.err")"
kdlq guard --require .missing --dlq "kafka:$DLQ" -b "$BROKERS" <"$WORK/events.ndjson" >/dev/null 2>&1
sort "$WORK/events.ndjson" >"$WORK/want.values"

# kill_replay_at K TOPIC ARGS...: starts a replay to TOPIC, waits until TOPIC
# holds K records, then kills the replay with SIGKILL.
# Small batches keep the replay slow enough for the kill to land mid-way.
kill_replay_at() {
  local k=$1 t=$2
  shift 2
  kdlq replay "$@" --to "kafka:$t" -b "$BROKERS" --batch 20 -v >>"$WORK/replay.log" 2>&1 &
  local pid=$!
  kconsume -b "$BROKERS" -t "$t" -c "$k" >/dev/null &
  local seen=$!
  # Whichever ends first: the consumer seeing K records (then the kill), or
  # the replay (done, or failed: then the consumer would wait forever).
  wait -n "$pid" "$seen" || true
  kill -9 "$pid" "$seen" 2>/dev/null || true
  wait "$pid" "$seen" 2>/dev/null || true
}

check_exactly_once() {
  local t=$1 id_pattern=$2
  kconsume -b "$BROKERS" -t "$t" -e >"$WORK/got.ndjson"
  assert_eq "$(wc -l <"$WORK/got.ndjson")" "$N" "records in $t"
  jq -c .value "$WORK/got.ndjson" | sort >"$WORK/got.values"
  assert_files_equal "$WORK/want.values" "$WORK/got.values"
  jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/got.ndjson" | sort >"$WORK/ids"
  assert_eq "$(sort -u "$WORK/ids" | wc -l)" "$N" "distinct replay ids in $t"
  grep -vqE "$id_pattern" "$WORK/ids" && fail "unexpected replay id in $t: $(grep -vE "$id_pattern" "$WORK/ids" | head -1)"
  return 0
}

for source in store topic; do
  t=$(topic "fixed-$source")
  if [[ $source == store ]]; then args=(--dlq "$BAD"); else args=(--dlq "kafka:$DLQ"); fi
  first=$((RANDOM % (N / 2) + 1))
  second=$((first + RANDOM % (N / 2) + 1))
  kill_replay_at "$first" "$t" "${args[@]}"
  kill_replay_at "$second" "$t" "${args[@]}"
  expect_exit 0 kdlq replay "${args[@]}" --to "kafka:$t" -b "$BROKERS" -v
  cat "$WORK/err" >>"$WORK/replay.log"
  if [[ $source == store ]]; then
    check_exactly_once "$t" '^[0-9a-f]{16}:[0-9]+$'
    expect_exit 0 kdlq stats --dlq "$BAD" --format ndjson
    assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[$N,0]" "store after the replays"
  else
    check_exactly_once "$t" "^kafka:$DLQ:[0-2]:[0-9]+$"
    expect_exit 0 kdlq stats --dlq "kafka:$DLQ" -b "$BROKERS" --format ndjson
    assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[$N,0]" "group position after the replays"
  fi
  # What the kills hit varies from run to run: say it (the unit tests kill
  # at every point deterministically).
  echo "$source: killed after $first and $second records;" \
    "$(grep -c 'settled an interrupted replay' "$WORK/replay.log" || true) batches in doubt settled"
  : >"$WORK/replay.log"
done

# Standard output: kill while the reader is slow, drain what was written,
# then finish. Nothing is missing; a kill repeats at most one line.
mkfifo "$WORK/pipe"
: >"$WORK/stdout.lines"
kills=0
for k in $((RANDOM % 500 + 1)) $((RANDOM % 500 + 1)); do
  args=(--dlq "$BAD")
  [[ $kills -eq 0 ]] && args+=(--again)
  kdlq replay "${args[@]}" >"$WORK/pipe" &
  pid=$!
  exec 3<"$WORK/pipe"
  for _ in $(seq "$k"); do
    IFS= read -r line <&3
    printf '%s\n' "$line" >>"$WORK/stdout.lines"
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  cat <&3 >>"$WORK/stdout.lines"
  exec 3<&-
  kills=$((kills + 1))
done
kdlq replay --dlq "$BAD" >>"$WORK/stdout.lines"
sort -u "$WORK/stdout.lines" >"$WORK/stdout.distinct"
assert_files_equal "$WORK/want.values" "$WORK/stdout.distinct"
repeated=$(($(wc -l <"$WORK/stdout.lines") - N))
((repeated <= kills)) || fail "$repeated lines repeated after $kills kills"
echo "stdout: $repeated lines repeated after $kills kills"
