#!/usr/bin/env bash
# kcheckpoint reset -t kinesis:S (kcheckpoint(1), Kinesis): a pipeline that
# reads a Kinesis stream (kinesis-mock, the fixture's) is moved by its
# state alone, as Kafka's are by kafka-consumer-groups --reset-offsets:
# --to-earliest reads every shard again from its trim horizon,
# --to-datetime T from the first record that arrived at or after T,
# --to-latest from what arrives next; SHARDS after the name move only
# those. A dry run (the default) prints the plan and changes nothing. A
# sequence number counts no records: --shift-by and --to-offset are
# refused (tests/cli/kcheckpoint_positions.sh).
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
export AWS_ENDPOINT_URL_KINESIS=$KINESIS

kinesis_stream "$STREAM" 2

S=$(store pipeline)
now_ms() { date +%s%3N; }
# produce FROM TO: records n = FROM..TO-1, keyed over 20 users.
produce() {
  jq -nc --argjson a "$1" --argjson b "$2" 'range($a; $b) | {user: "user-\(. % 20)", n: .}' >"$WORK/batch.ndjson"
  expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user "$WORK/batch.ndjson"
}
# run: the pipeline reads on from its state to the end; prints the n of
# each record it read, sorted.
run() {
  kconsume -t "kinesis:$STREAM" --state "$S" -e --checkpoint-interval 100ms 2>"$WORK/consume.err" |
    tee "$WORK/read.ndjson" | kcheckpoint commit --state "$S" >/dev/null 2>"$WORK/commit.err" ||
    fail "the pipeline failed: $(cat "$WORK/consume.err" "$WORK/commit.err")"
  jq -r 'select(has("value")) | .value.n' "$WORK/read.ndjson" | sort -n | paste -sd' '
}
range() { seq -s' ' "$1" "$(($2 - 1))"; }
positions() { kcheckpoint export --state "$S" | jq -c '[.partition, .offset]' | paste -sd' '; }

produce 0 20
assert_eq "$(run)" "$(range 0 20)" "the first run"
read_to_end=$(positions)
[[ $read_to_end == '[0,"'*'"] [1,"'*'"]' ]] || fail "the state keeps no sequence number of each shard: $read_to_end"
assert_eq "$(run)" "" "a run with nothing new"

# --- --to-earliest: a dry run changes nothing; --execute reads all again -----------
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM" --to-earliest --format ndjson
assert_contains "$WORK/err" "kcheckpoint: warning: dry run: nothing changed; add --execute to apply this plan"
assert_eq "$(jq -c '[.partition, .offset]' "$WORK/out" | paste -sd' ')" "[0,-2] [1,-2]" "the plan"
assert_eq "$(jq -c '[.partition, .current]' "$WORK/out" | paste -sd' ')" "$read_to_end" "the plan's current positions"
assert_eq "$(positions)" "$read_to_end" "the state after a dry run"
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM" --to-earliest --execute --format ndjson
assert_eq "$(positions)" "[0,-2] [1,-2]" "the state after --to-earliest"
assert_eq "$(run)" "$(range 0 20)" "the run after --to-earliest"

# --- --to-datetime: from the first record that arrived at or after T ---------------
t=$(now_ms)
# The next records arrive after t: the clock is read until it has passed it.
wait_for "the clock to pass $t" 5 eval '(($(now_ms) > t))'
produce 20 30
assert_eq "$(run)" "$(range 20 30)" "the records written after t"
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM" --to-datetime "$t" --execute --format ndjson
assert_eq "$(positions)" "[0,\"@$t\"] [1,\"@$t\"]" "the state after --to-datetime"
assert_eq "$(run)" "$(range 20 30)" "the run after --to-datetime"

# --- --to-latest: only what arrives next ----------------------------------------------
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM" --to-earliest --execute
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM" --to-latest --execute
assert_eq "$(run)" "" "the run after --to-latest"
produce 30 35
assert_eq "$(run)" "$(range 30 35)" "the records written after --to-latest"

# --- one shard: the other stays where it was ------------------------------------------
before=$(positions)
expect_exit 0 kcheckpoint reset --state "$S" -t "kinesis:$STREAM:1" --to-earliest --execute --format table
assert_contains "$WORK/out" "CURRENT-OFFSET"
assert_eq "$(positions | cut -d' ' -f1)" "$(cut -d' ' -f1 <<<"$before")" "shard 0 after resetting shard 1"
got=$(run)
# Shard 1's records, every one, and none of shard 0's.
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e -q
want=$(jq -r 'select(.partition == 1) | .value.n' "$WORK/out" | sort -n | paste -sd' ')
[[ -n $want ]] || fail "shard 1 holds no record"
assert_eq "$got" "$want" "the run after resetting shard 1"
