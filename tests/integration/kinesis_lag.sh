#!/usr/bin/env bash
# klag on a Kinesis stream (klag(1), Kinesis): a pipeline's state keeps each
# shard's last sequence number read; klag -t kinesis:S --state P shows it
# whole, no end and no lag in records (a sequence number counts none), and
# the lag in seconds as the age of the first record after it, read from the
# shard (kinesis-mock, the fixture's). A shard read to its end is 0 behind;
# one the state has no position on counts from its start (--uncommitted
# earliest, with a warning). Burrow's rules judge the lag in time: two
# samples of a state that did not move are STALL, and --fail-on and
# --max-lag-seconds exit 3. What counts records is refused for a stream.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
# The endpoint as AWS's conventions give it to every program here.
export AWS_ENDPOINT_URL_KINESIS=$KINESIS

kinesis_stream "$STREAM" 2

jq -nc 'range(60) | {user: "user-\(.)", n: .}' >"$WORK/input.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user "$WORK/input.ndjson"
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e -q
mv "$WORK/out" "$WORK/records.ndjson"
assert_eq "$(jq -r .partition "$WORK/records.ndjson" | sort -u | paste -sd,)" "0,1" "shards holding records"
# Each shard's records in order: "SEQUENCE TIMESTAMP", one file a shard.
for p in 0 1; do
  jq -r --argjson p "$p" 'select(.partition == $p) | "\(.offset) \(.timestamp)"' "$WORK/records.ndjson" >"$WORK/shard$p"
  (($(lines "$WORK/shard$p") > 5)) || fail "shard $p holds too few records to test with"
done
seq_at() { sed -n "${2}p" "$WORK/shard$1" | cut -d' ' -f1; }
time_at() { sed -n "${2}p" "$WORK/shard$1" | cut -d' ' -f2; }
position() { jq -nc --arg t "$STREAM" --argjson p "$1" --arg s "$2" '{topic: $t, partition: $p, offset: $s}'; }
now_ms() { date +%s%3N; }

# --- a state 5 records into each shard: as old as its 6th record -------------------
S=$(store behind)
{ position 0 "$(seq_at 0 5)"; position 1 "$(seq_at 1 5)"; } | expect_exit 0 kcheckpoint import --state "$S"
before=$(now_ms)
expect_exit 0 klag -t "kinesis:$STREAM" --state "$S" --format ndjson
after=$(now_ms)
assert_empty "$WORK/err"
for p in 0 1; do
  line=$(jq -c --argjson p "$p" 'select(.partition == $p)' "$WORK/out")
  assert_eq "$(jq -c '[.topic, .committed, .end, .lag]' <<<"$line")" "[\"$STREAM\",\"$(seq_at "$p" 5)\",null,null]" "shard $p: its position, no end, no lag in records"
  # The age of its 6th record, as klag saw it between before and after.
  sixth=$(time_at "$p" 6)
  jq -e --argjson lo "$(((before - sixth) / 1000 - 1))" --argjson hi "$(((after - sixth) / 1000 + 1))" \
    '.lag_seconds >= $lo and .lag_seconds <= $hi' <<<"$line" >/dev/null ||
    fail "shard $p: lag_seconds $(jq .lag_seconds <<<"$line") is not the age of its 6th record (arrived at $sixth, klag ran from $before to $after)"
done
assert_eq "$(jq -c 'select(.at) | [.partitions, .lag, .status]' "$WORK/out")" '[2,null,"OK"]' "the state's line"
# The table shows the sequence number whole, and no end or lag in records.
expect_exit 0 klag -t "kinesis:$STREAM" --state "$S" --format table
assert_contains "$WORK/out" " $(seq_at 0 5) "
assert_eq "$(awk -v s="$STREAM" '$2 == s && $3 == "0" { print $5, $6 }' "$WORK/out")" "- -" "table: shard 0's end and lag"
# Prometheus: the lag in seconds alone.
expect_exit 0 klag -t "kinesis:$STREAM" --state "$S" --format prometheus
grep -q "^kpipe_consumer_lag_seconds{state=\"$S\",topic=\"$STREAM\",partition=\"1\"} [0-9.]*\$" "$WORK/out" ||
  fail "no lag in seconds for shard 1: $(grep lag_seconds "$WORK/out")"
grep -q '^kpipe_consumer_lag{' "$WORK/out" && fail "a lag in records for a Kinesis shard: $(grep '^kpipe_consumer_lag{' "$WORK/out")"

# Alerts: over --max-lag-seconds 0, and a state that did not move between
# two samples of --history is STALL.
expect_exit 3 klag -t "kinesis:$STREAM" --state "$S" --max-lag-seconds 0
assert_contains "$WORK/err" "klag: error: state '$S': $STREAM [0] is "
assert_contains "$WORK/err" "s behind, over --max-lag-seconds 0"
H="$WORK/history.db"
expect_exit 0 klag -t "kinesis:$STREAM" --state "$S" --history "$H" --fail-on STALL
expect_exit 3 klag -t "kinesis:$STREAM" --state "$S" --history "$H" --fail-on STALL
assert_contains "$WORK/err" "klag: error: state '$S' is STALL (--fail-on STALL): $STREAM [0]: position $(seq_at 0 5) did not move in 2 samples over "
# klag status judges the history alike, without asking the stream.
expect_exit 3 klag status --state "$S" --history "$H" --fail-on STALL
assert_contains "$WORK/err" "position $(seq_at 0 5) did not move"

# --- read to the end: 0 behind -----------------------------------------------------
E=$(store end)
{ position 0 "$(tail -1 "$WORK/shard0" | cut -d' ' -f1)"; position 1 "$(tail -1 "$WORK/shard1" | cut -d' ' -f1)"; } |
  expect_exit 0 kcheckpoint import --state "$E"
expect_exit 0 klag -t "kinesis:$STREAM" --state "$E" --format ndjson --fail-on WARN
assert_eq "$(jq -c 'select(.partition != null) | [.partition, .lag_seconds, .status]' "$WORK/out" | paste -sd' ')" \
  '[0,0,"OK"] [1,0,"OK"]' "shards read to their end"

# --- a shard the state has no position on: from its start --------------------------
U=$(store uncommitted)
position 0 "$(tail -1 "$WORK/shard0" | cut -d' ' -f1)" | expect_exit 0 kcheckpoint import --state "$U"
before=$(now_ms)
expect_exit 0 klag -t "kinesis:$STREAM" --state "$U" --format ndjson
first=$(time_at 1 1)
line=$(jq -c 'select(.partition == 1)' "$WORK/out")
assert_eq "$(jq -c '[.committed, .assumed]' <<<"$line")" '[null,"earliest"]' "shard 1 without a position"
jq -e --argjson lo "$(((before - first) / 1000 - 1))" '.lag_seconds >= $lo' <<<"$line" >/dev/null ||
  fail "shard 1: lag_seconds $(jq .lag_seconds <<<"$line") is not the age of its first record (arrived at $first)"
assert_eq "$(cat "$WORK/err")" \
  "klag: warning: state '$U' has no committed offset on 1 partition of topic '$STREAM' (1): counted from the shard's start (--uncommitted earliest)" \
  "the warning"
expect_exit 0 klag -t "kinesis:$STREAM" --state "$U" --format ndjson --uncommitted latest
assert_eq "$(jq -c 'select(.partition == 1) | [.assumed, .lag_seconds]' "$WORK/out")" '["latest",0]' "shard 1, --uncommitted latest"

# --- refused -------------------------------------------------------------------------
expect_exit 1 klag --state "$S" --format ndjson
assert_eq "$(cat "$WORK/err")" \
  "klag: error: $STREAM [0] is kept at $(seq_at 0 5), not at a Kafka offset: for a Kinesis stream, give -t kinesis:$STREAM" \
  "a Kinesis state read as Kafka's"
expect_exit 2 klag -t "kinesis:$STREAM" -g billing
assert_eq "$(cat "$WORK/err")" "klag: error: a Kinesis stream has no consumer groups: its lag is that of a pipeline's --state STORE" "a group"
expect_exit 2 klag -t "kinesis:$STREAM" --state "$S" --max-lag 10
assert_eq "$(cat "$WORK/err")" "klag: error: --max-lag counts records, which a Kinesis shard's sequence numbers do not: give --max-lag-seconds" "--max-lag"
expect_exit 2 klag -t "kinesis:$STREAM" -t events --state "$S"
assert_eq "$(cat "$WORK/err")" "klag: error: -t kinesis:NAME reads one Kinesis stream: give it alone" "a stream and a topic"
expect_exit 1 klag -t "kinesis:no-such-$RUN_ID" --state "$S"
assert_contains "$WORK/err" "klag: error: "
assert_contains "$WORK/err" "no offsets on Kinesis stream 'no-such-$RUN_ID'"
