#!/usr/bin/env bash
# kdlq replay --to kinesis:STREAM (kinesis-mock, the fixture's), from a
# dead-letter store (an SQLite file, or a PostgreSQL database: lib.sh's
# store). Entries from envelopes go back as the records they came from,
# their key the partition key, their headers left out; plain lines as
# their bytes, keyed by their replay id. Every entry arrives once with its
# key and value, and a second replay sends nothing. A replay killed after a
# batch's records were written and before it learnt so (a proxy holds
# PutRecords' answer, then the test kills the replay: no sleep, no race)
# leaves the batch in doubt; the next replay finds its records in the
# stream by their partition key and bytes, marks them replayed, and sends
# only the rest: every entry once. A stream that does not exist is an
# error before anything is marked. A Kafka dead-letter topic (kbroker, or
# the real broker) replayed into a stream and killed twice so, then run
# again, also delivers each entry once: its group keeps how far entries
# were handed out, and those are what the next replay looks for.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
kinesis_client_env

stream_json() { jq -nc --arg s "$1" '{StreamName: $s}'; }

# make_store STORE N: N dead letters, alternately an envelope (source
# topic src, key user-K, a header) and a plain line, each line its own.
make_store() {
  local store=$1 n=$2
  jq -nc --argjson n "$n" 'range($n) | if . % 2 == 0
      then {topic: "src", partition: 0, offset: ., timestamp: 1764412345000, key: "user-\(. % 6)",
            headers: [["trace", "t\(.)"]], value: {i: ., kind: "env", text: "é \(.)"}}
      else {i: ., kind: "plain", text: "line \(.)"} end' >"$WORK/letters.ndjson"
  kdlq guard --require .missing --require .value.missing --dlq "$store" <"$WORK/letters.ndjson" \
    >/dev/null 2>"$WORK/guard.err" || fail "kdlq guard --dlq $store failed: $(tail -3 "$WORK/guard.err")"
  assert_eq "$(sql "$store" "SELECT count(*) FROM dead_letters")" "$n" "dead letters in $store"
}

# want STORE: each entry's record as it must arrive, {key, value}, sorted:
# an envelope's key and value, a plain line keyed by STORE_ID:ID.
want() {
  local store_id
  store_id=$(sql "$1" "SELECT value FROM dead_letter_meta WHERE key = 'store_id'")
  sql "$1" "SELECT id FROM dead_letters ORDER BY id" >"$WORK/ids"
  paste -d' ' "$WORK/ids" "$WORK/letters.ndjson" |
    while read -r id line; do
      jq -c --arg id "$store_id:$id" 'if .kind == "plain" then {key: $id, value: .}
        else {key, value} end' <<<"$line"
    done | sort
}

# got STREAM: what the stream holds, {key, value}, sorted.
got() {
  expect_exit 0 kconsume -t "kinesis:$1" --from earliest -e "${AWS[@]}" -q
  assert_empty "$WORK/err"
  jq -c '{key, value}' "$WORK/out" | sort
}

# --- every entry once, and a second replay sends nothing --------------------------
STREAM="kpipe-$RUN_ID"
kinesis_stream "$STREAM" 2
BAD=$(store bad)
make_store "$BAD" 40
want "$BAD" >"$WORK/want"
expect_exit 0 kdlq replay --dlq "$BAD" --to "kinesis:$STREAM" "${AWS[@]}" --batch 7 -v
assert_contains "$WORK/err" "replayed 40 entries to kinesis:$STREAM"
assert_empty "$WORK/out"
got "$STREAM" >"$WORK/got"
assert_files_equal "$WORK/got" "$WORK/want"
# No envelope's header reached a record (a Kinesis record has none).
expect_exit 0 kdlq stats --dlq "$BAD" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[40,0]" "the store after the replay"

expect_exit 0 kdlq replay --dlq "$BAD" --to "kinesis:$STREAM" "${AWS[@]}" -v
assert_contains "$WORK/err" "replayed 0 entries to kinesis:$STREAM"
got "$STREAM" >"$WORK/got"
assert_files_equal "$WORK/got" "$WORK/want"

# --- killed between send and mark ---------------------------------------------------
# The proxy forwards every call to kinesis-mock, and holds the answer to
# the second PutRecords: batch 1 (5 entries) is acknowledged and marked,
# batch 2's 5 records are in the stream, and the replay never learns so.
KILLED="kpipe-$RUN_ID-killed"
kinesis_stream "$KILLED" 2
HELD=$(store held)
make_store "$HELD" 14
want "$HELD" >"$WORK/want"
kill_held_replay 2 --dlq "$HELD" --to "kinesis:$KILLED" --batch 5
assert_eq "$(sql "$HELD" "SELECT count(*) FROM dead_letters WHERE replayed_at IS NOT NULL")" 5 \
  "entries marked replayed by the killed replay"
assert_eq "$(sql "$HELD" "SELECT count(*) FROM dead_letters WHERE replay_batch IS NOT NULL")" 5 \
  "entries the killed replay left in doubt"

expect_exit 0 kdlq replay --dlq "$HELD" --to "kinesis:$KILLED" "${AWS[@]}" --batch 5 -v
assert_contains "$WORK/err" "settled an interrupted replay: 5 entries found at kinesis:$KILLED and marked replayed"
assert_contains "$WORK/err" "replayed 4 entries to kinesis:$KILLED"
got "$KILLED" >"$WORK/got"
assert_files_equal "$WORK/got" "$WORK/want"
expect_exit 0 kdlq stats --dlq "$HELD" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[14,0]" "the store after the settled replay"

# --- a stream that does not exist is said so, in one line, before anything is sent --
expect_exit 1 kdlq replay --dlq "$HELD" --to "kinesis:$STREAM-missing" "${AWS[@]}" --again
assert_eq "$(lines "$WORK/err")" 1 "lines of the diagnostic ($(cat "$WORK/err"))"
assert_contains "$WORK/err" "kdlq: error: replay target 'kinesis:$STREAM-missing': kinesis stream '$STREAM-missing' does not exist"
expect_exit 0 kdlq stats --dlq "$HELD" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[14,0]" "the store after a replay to no stream"

# --- a Kafka dead-letter topic into a stream, killed twice, then to the end ---------
# The topic's replay group keeps how far entries were handed out with its
# mark: killed with its second batch written and unanswered, then with its
# first, every entry still arrives once, found by content where in doubt.
start_broker dead:2
DEAD=$(topic dead)
jq -nc 'range(60) | if . % 2 == 0
    then {topic: "src", partition: (. % 4 / 2), offset: ., timestamp: 1764412345000,
          key: "user-\(.)", value: {i: ., kind: "env"}}
    else {i: ., kind: "plain"} end' >"$WORK/topic-letters.ndjson"
kdlq guard --require .missing --require .value.missing --dlq "kafka:$DEAD" -b "$BROKERS" \
  <"$WORK/topic-letters.ndjson" >/dev/null 2>"$WORK/guard.err" ||
  fail "kdlq guard --dlq kafka:$DEAD failed: $(tail -3 "$WORK/guard.err")"
FROM_TOPIC="kpipe-$RUN_ID-from-topic"
kinesis_stream "$FROM_TOPIC" 2
to_stream=(--dlq "kafka:$DEAD" -b "$BROKERS" --to "kinesis:$FROM_TOPIC" --batch 8 -v)
kill_held_replay 2 "${to_stream[@]}"
expect_exit 0 kdlq stats --dlq "kafka:$DEAD" -b "$BROKERS" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[60,52]" "the topic after the first kill"
kill_held_replay 1 "${to_stream[@]}"
expect_exit 0 kdlq stats --dlq "kafka:$DEAD" -b "$BROKERS" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[60,44]" "the topic after the second kill"
expect_exit 0 kdlq replay "${to_stream[@]}" "${AWS[@]}"
assert_contains "$WORK/err" "settled an interrupted replay: 8 entries found at kinesis:$FROM_TOPIC and marked replayed"
assert_contains "$WORK/err" "replayed 36 entries to kinesis:$FROM_TOPIC"
got "$FROM_TOPIC" >"$WORK/got"
# Each entry once: an envelope as its record, a plain line keyed by its
# replay id (kafka:TOPIC:PARTITION:OFFSET).
assert_eq "$(lines "$WORK/got")" 60 "records in $FROM_TOPIC"
assert_files_equal <(jq -c .value "$WORK/got" | sort) \
  <(jq -c 'if .kind == "plain" then . else .value end' "$WORK/topic-letters.ndjson" | sort)
assert_eq "$(jq -r 'select(.value.kind == "plain") | .key' "$WORK/got" |
  grep -cvE "^kafka:$DEAD:[01]:[0-9]+$")" 0 "keys of the plain lines"
expect_exit 0 kdlq list --dlq "kafka:$DEAD" -b "$BROKERS" --format ndjson
assert_eq "$(jq -r 'select(.replayed | not) | .id' "$WORK/out")" "" "entries not replayed to $FROM_TOPIC"
kinesis_api DeleteStream "$(stream_json "$FROM_TOPIC")" >/dev/null

kinesis_api DeleteStream "$(stream_json "$STREAM")" >/dev/null
kinesis_api DeleteStream "$(stream_json "$KILLED")" >/dev/null
