#!/usr/bin/env bash
# Positions of both logs in one state (kpipe(7), LOGS), through kcheckpoint
# import and export: a Kafka offset as a number, a Kinesis sequence number
# as a string of its 56 digits (no number keeps them), a shard kept at the
# time it was started, and the log's start (-2); export gives each back
# digit for digit, verify finds nothing wrong, and what is no position is
# refused naming its line, the state unchanged.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

seq=49590338271490256608559692538361571095921575989136588898
cat >positions.ndjson <<EOF
{"topic":"events","partition":0,"offset":1043}
{"topic":"user-events","partition":0,"offset":"$seq"}
{"topic":"user-events","partition":1,"offset":"@1764412345123"}
{"topic":"user-events","partition":2,"offset":-2}
EOF
# -2 is no offset import takes: it is where kconsume keeps a Kinesis shard
# started at its trim horizon, not a position to set by hand.
run 65 kcheckpoint import --state s.db positions.ndjson
expect_stderr "kcheckpoint: error: positions.ndjson: line 4: field 'offset' is missing, or neither a non-negative integer nor a Kinesis position
"
head -3 positions.ndjson >kept.ndjson
run 0 kcheckpoint import --state s.db kept.ndjson
run 0 kcheckpoint export --state s.db
jq -c '{topic, partition, offset}' "$WORK/out" >exported.ndjson
diff kept.ndjson exported.ndjson >&2 || fail "export differs from what was imported"
# The digits as text, never a number jq would round.
[[ $(jq -r 'select(.partition == 0 and .topic == "user-events") | .offset | type' "$WORK/out") == string ]] ||
  fail "a sequence number exported as a number"
run 0 kcheckpoint verify --state s.db
expect_no_stderr

for bad in '"0123"' '"12x"' '"@"' '1.5' 'null' '"-1"'; do
  printf '{"topic":"user-events","partition":3,"offset":%s}\n' "$bad" >bad.ndjson
  run 65 kcheckpoint import --state s.db bad.ndjson
  expect_stderr "kcheckpoint: error: bad.ndjson: line 1: field 'offset' is missing, or neither a non-negative integer nor a Kinesis position
"
done
run 0 kcheckpoint export --state s.db
[[ $(jq -c '{topic, partition, offset}' "$WORK/out") == "$(cat kept.ndjson)" ]] ||
  fail "a refused import changed the state"

# reset computes Kafka offsets from a topic's bounds: a state holding a
# Kinesis position is refused at once, before any broker is asked, unless
# the stream is named (integration/kinesis: kinesis_reset).
run 1 kcheckpoint reset --state s.db --to-earliest -b 127.0.0.1:1
expect_stderr "kcheckpoint: error: user-events [0] is kept at a Kinesis position ($seq): a Kinesis stream's shards are reset with -t kinesis:NAME
"
# What counts records is refused for a stream, before it is asked.
run 2 kcheckpoint reset --state s.db --shift-by -5 -t kinesis:user-events
expect_stderr "kcheckpoint: error: --shift-by and --to-offset count records, which a Kinesis shard's sequence numbers do not: give --to-earliest, --to-latest, --to-datetime or --by-duration
"
run 2 kcheckpoint reset --state s.db --to-earliest -t kinesis:user-events -t events
expect_stderr "kcheckpoint: error: -t kinesis:NAME resets one Kinesis stream's shards: give it alone
"
for group in --to-group --from-group; do
  run 1 kcheckpoint sync --state s.db "$group" g -b 127.0.0.1:1
  expect_stderr "kcheckpoint: error: user-events [0] is kept at a Kinesis position ($seq): sync copies offsets to and from a Kafka consumer group, and Kinesis has none
"
done
