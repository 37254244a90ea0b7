#!/usr/bin/env bash
# --dlq kafka:TOPIC: dead letters as Kafka records with their original key,
# value, headers and timestamp and the context headers; kdlq reads the
# topic as a store (list, stats), replays it with a consumer group as the
# position, and purges its replayed prefix.
source "$(dirname "$0")/lib.sh"
start_broker events:2 dlq:2 lines:1 fixed:2
T=$(topic events)
DLQ=$(topic dlq)
LINES=$(topic lines)
F=$(topic fixed)

cat >"$WORK/in.ndjson" <<'IN'
{"key":"u1","timestamp":1764412345001,"headers":[["trace","a1"]],"value":{"user_id":"u1","ts":1764412345001}}
{"key":"u2","timestamp":1764412345002,"headers":[["trace","a2"],["trace","b2"],["bin",{"base64":"/wA="}]],"value":{"user_id":"u2"}}
{"key":"u3","timestamp":1764412345003,"value":{"user_id":3,"ts":1764412345003}}
{"key":null,"timestamp":1764412345004,"headers":[["empty",null]],"value":"plain text"}
IN
expect_exit 0 kproduce -b "$BROKERS" -t "$T" --envelope "$WORK/in.ndjson"
kconsume -b "$BROKERS" -t "$T" -e >"$WORK/consumed.ndjson"
grep -v '"key":"u1"' "$WORK/consumed.ndjson" >"$WORK/bad.ndjson"

expect_exit 0 kdlq guard --require .value.user_id:string --require .value.ts:time --dlq "kafka:$DLQ" -b "$BROKERS" \
  <"$WORK/consumed.ndjson"
assert_eq "$(jq -r .key "$WORK/out")" "u1" "passed"
assert_eq "$(cat "$WORK/err")" "kdlq: warning: sent 3 lines to the dead-letter store kafka:$DLQ" "guard's stderr"

# The records, as kcat sees them: the original record, then the context.
kcat -b "$BROKERS" -C -t "$DLQ" -e -q -J >"$WORK/dlq.json"
assert_eq "$(wc -l <"$WORK/dlq.json")" 3 "dead-letter records"
while IFS= read -r bad; do
  key=$(jq -r .key <<<"$bad")
  rec=$(jq -c --arg key "$key" 'select((.key // "null") == $key)' "$WORK/dlq.json")
  [[ -n $rec ]] || fail "no dead letter for key $key"
  h() { jq -r --arg name "$1" '.headers as $h | [range(0; $h | length; 2) | select($h[.] == $name) | $h[. + 1]] | .[0]' <<<"$rec"; }
  assert_eq "$(h kpipe.error.stage)" "kdlq-guard" "stage of $key"
  [[ $(h kpipe.error.reason) =~ ^line\ [1-4]:\ field\ \'\.value ]] || fail "reason of $key: $(h kpipe.error.reason)"
  [[ $(h kpipe.error.at) =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z$ ]] || fail "time of $key: $(h kpipe.error.at)"
  assert_eq "$(h kpipe.source.topic)" "$T" "source topic of $key"
  assert_eq "$(h kpipe.source.partition)" "$(jq .partition <<<"$bad")" "source partition of $key"
  assert_eq "$(h kpipe.source.offset)" "$(jq .offset <<<"$bad")" "source offset of $key"
  assert_eq "$(jq .ts <<<"$rec")" "$(jq .timestamp <<<"$bad")" "timestamp of $key"
  # The record's own headers come first, in order (kcat shows binary ones lossily).
  want=$(jq -c '[(.headers // [])[] | .[0]]' <<<"$bad")
  got=$(jq -c '[.headers as $h | range(0; $h | length; 2) | $h[.] | select(startswith("kpipe.") | not)]' <<<"$rec")
  assert_eq "$got" "$want" "header names of $key"
done <"$WORK/bad.ndjson"

# kproduce's dead letters are plain lines: the value, with no source.
printf '%s\n' '{"ok":1}' '{"broken":' >"$WORK/lines.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$LINES" --on-error dlq --dlq "kafka:$DLQ" "$WORK/lines.ndjson"
expect_exit 0 kdlq list --dlq "kafka:$DLQ" -b "$BROKERS" --stage kproduce --format ndjson
assert_eq "$(jq -c '[.stage, .reason, .source_topic, .payload]' "$WORK/out")" \
  '["kproduce","line 2: not valid JSON: truncated object or array",null,"{\"broken\":"]' "kproduce's entry"

# kdlq reads the topic as a store: each line back byte for byte.
expect_exit 0 kdlq list --dlq "kafka:$DLQ" -b "$BROKERS" --stage kdlq-guard --format ndjson
jq -r .payload "$WORK/out" | sort >"$WORK/got.lines"
sort "$WORK/bad.ndjson" >"$WORK/want.lines"
assert_files_equal "$WORK/want.lines" "$WORK/got.lines"
assert_eq "$(jq -r '.id' "$WORK/out" | grep -cE '^[01]:[0-9]+$')" 3 "entry ids are partition:offset"
expect_exit 0 kdlq stats --dlq "kafka:$DLQ" -b "$BROKERS" --by stage --format ndjson
assert_eq "$(jq -c '[.stage, .count, .pending]' "$WORK/out" | sort | tr '\n' ' ')" \
  '["kdlq-guard",3,3] ["kproduce",1,1] ' "stats by stage"

# A filtered replay needs its own group; with one, it moves only its own position.
expect_exit 2 kdlq replay --dlq "kafka:$DLQ" -b "$BROKERS" --stage kproduce
expect_exit 0 kdlq replay --dlq "kafka:$DLQ" -b "$BROKERS" --stage kproduce --group "$(group kproduce)"
assert_eq "$(cat "$WORK/out")" '{"broken":' "filtered replay"

# Replay everything to a topic: records as they were, each with its entry's id.
expect_exit 0 kdlq replay --dlq "kafka:$DLQ" -b "$BROKERS" --to "kafka:$F" -v
assert_contains "$WORK/err" "replayed 4 entries to kafka:$F"
kconsume -b "$BROKERS" -t "$F" -e >"$WORK/fixed.ndjson"
project='select(.key != null or .value != "{\"broken\":") | {key, timestamp, value,
  headers: ((.headers // []) | map(select(.[0] != "kpipe.replay.id")))}'
jq -c "$project" "$WORK/bad.ndjson" | sort >"$WORK/want.records"
jq -c "$project" "$WORK/fixed.ndjson" | sort >"$WORK/got.records"
assert_files_equal "$WORK/want.records" "$WORK/got.records"
jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/fixed.ndjson" | sort >"$WORK/ids"
assert_eq "$(grep -cE "^kafka:$DLQ:[01]:[0-9]+$" "$WORK/ids")" 4 "replay ids"
expect_exit 0 kdlq replay --dlq "kafka:$DLQ" -b "$BROKERS" --to "kafka:$F" -v
assert_contains "$WORK/err" "replayed 0 entries to kafka:$F"
expect_exit 0 kdlq stats --dlq "kafka:$DLQ" -b "$BROKERS" --by stage --format ndjson
assert_eq "$(jq -s 'map(.pending) | add' "$WORK/out")" 0 "pending after the replay"

# Purge: the replayed prefix of each partition. kbroker has no DeleteRecords.
expect_exit 0 kdlq purge --dlq "kafka:$DLQ" -b "$BROKERS" --replayed --dry-run
assert_eq "$(cat "$WORK/out")" "would purge 4 entries from kafka:$DLQ" "purge dry run"
if [[ $KPIPE_TEST_BROKER == kbroker ]]; then
  expect_exit 1 kdlq purge --dlq "kafka:$DLQ" -b "$BROKERS" --replayed
  assert_contains "$WORK/err" "the broker does not support DeleteRecords"
else
  expect_exit 0 kdlq purge --dlq "kafka:$DLQ" -b "$BROKERS" --replayed
  expect_exit 0 kdlq list --dlq "kafka:$DLQ" -b "$BROKERS" --format ndjson
  assert_empty "$WORK/out"
fi

# A dead-letter topic that does not exist is looked up as kproduce looks up
# its topic (kproduce(1), THE TOPIC): one the broker creates is waited for
# and written to; one it does not is said missing at start, and asking did
# not create it. Kafka's first answer about a topic it is creating is
# 'unknown topic': the guard used to say 'does not exist' with the topic
# made on the way (issue 33, item 8's sibling).
NEW=$(topic dlq-new)
expect_exit 0 kdlq guard --require .value.user_id:string --dlq "kafka:$NEW" -b "$BROKERS" -q \
  <"$WORK/consumed.ndjson"
assert_eq "$(jq -r .key "$WORK/out" | tr '\n' ' ')" "u1 u2 " "passed to a new dead-letter topic"
expect_exit 0 kdlq list --dlq "kafka:$NEW" -b "$BROKERS" --format ndjson
assert_eq "$(jq -r .payload "$WORK/out" | jq -r .key | sort | tr '\n' ' ')" "null u3 " \
  "dead letters in the new topic"
MISSING=$(topic dlq-missing)
expect_exit 1 kdlq guard --require .value.user_id:string --dlq "kafka:$MISSING" -b "$BROKERS" \
  -X allow.auto.create.topics=false <"$WORK/consumed.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kdlq: error: dead-letter store 'kafka:$MISSING': topic '$MISSING' does not exist (allow.auto.create.topics is false)" \
  "a missing dead-letter topic"
expect_exit 1 kconsume -b "$BROKERS" -t "$MISSING" -e
assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$MISSING' does not exist" "not created"
