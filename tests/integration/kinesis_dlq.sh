#!/usr/bin/env bash
# --dlq kinesis:STREAM (kinesis-mock, the fixture's): a pipeline's bad
# lines as records of a stream, one JSON object each. kdlq list shows them
# with their reasons and exact payloads (a line that is not UTF-8 as
# payload_base64); replay to standard output gives the original lines byte
# for byte, its position kept in --state; a replay into a topic (kbroker,
# made slow so that it takes a while) killed with SIGKILL mid-way and run
# again delivers each entry exactly once, settled by the records' replay
# ids; list then shows them replayed. Into another stream, killed twice
# (a proxy holds a PutRecords' answer, then the test kills the replay) and
# run again, each entry arrives once, settled by the records' content. A
# replay without --state, into the stream itself, and a purge are usage
# errors in one line; a stream that does not exist is said so at start.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
kinesis_client_env
start_fault_broker 1 fixed:2
F=$(topic fixed)
stream_json() { jq -nc --arg s "$1" '{StreamName: $s}'; }

D="kpipe-$RUN_ID-dlq"
kinesis_stream "$D" 2
STATE=$(store state)

# Good lines pass; bad ones: missing fields, not JSON, not UTF-8, and
# envelopes (their source topic and partition the partition key).
{
  for i in $(seq 1 6); do
    printf '{"user":"u%d","n":%d}\n' "$i" "$i"
    printf '{"n":%d,"text":"é %d"}\n' "$i" "$i"
    printf '{"topic":"src","partition":%d,"offset":%d,"timestamp":1764412345000,"key":"k%d","value":{"n":%d}}\n' \
      $((i % 2)) "$i" "$i" "$i"
  done
  printf '{"broken":\n'
  printf '{"n":7,"bytes":"\xff\xfe"}\n'
} >"$WORK/in.ndjson"
grep -aF '"user"' "$WORK/in.ndjson" >"$WORK/good.ndjson"
grep -avF '"user"' "$WORK/in.ndjson" | LC_ALL=C sort >"$WORK/bad.sorted"
BAD=$(lines "$WORK/bad.sorted")

# kdlq guard with --endpoint, then kdedup, which has no --endpoint: AWS's
# variables name the endpoint.
kdlq guard --require .user --dlq "kinesis:$D" "${AWS[@]}" <"$WORK/in.ndjson" 2>"$WORK/guard.err" |
  AWS_ENDPOINT_URL_KINESIS=$KINESIS kdedup --key .user --dlq "kinesis:$D" >"$WORK/passed.ndjson" \
    2>"$WORK/dedup.err" || fail "the pipeline failed: $(cat "$WORK/guard.err" "$WORK/dedup.err")"
assert_files_equal "$WORK/passed.ndjson" "$WORK/good.ndjson"
assert_contains "$WORK/guard.err" "sent $BAD lines to the dead-letter store kinesis:$D"

# --- list: reasons, sources and exact payloads ---------------------------------------
expect_exit 0 kdlq list --dlq "kinesis:$D" "${AWS[@]}" --format ndjson
assert_empty "$WORK/err"
cp "$WORK/out" "$WORK/list.ndjson"
assert_eq "$(lines "$WORK/list.ndjson")" "$BAD" "entries listed"
assert_eq "$(jq -r 'select(.stage != "kdlq-guard") | .stage' "$WORK/list.ndjson")" "" "stages"
assert_eq "$(jq -r 'select(.id | test("^[0-9]+:[0-9]+$") | not) | .id' "$WORK/list.ndjson")" "" "ids (SHARD:SEQUENCE)"
assert_eq "$(jq -r 'select(.replayed) | .id' "$WORK/list.ndjson")" "" "entries replayed before any replay"
assert_contains "$WORK/list.ndjson" "field '.user' is missing"
assert_eq "$(jq -c 'select(.source_topic == "src") | [.source_partition, .source_offset]' "$WORK/list.ndjson" |
  sort | tr -d '\n')" "[0,2][0,4][0,6][1,1][1,3][1,5]" "envelopes' sources"
jq -j 'select(.payload) | .payload + "\n"' "$WORK/list.ndjson" >"$WORK/listed"
assert_eq "$(jq -r 'select(.payload_base64) | .payload_base64' "$WORK/list.ndjson")" \
  "$(printf '{"n":7,"bytes":"\xff\xfe"}' | base64 -w0)" "the line that is not UTF-8"
grep -avF '"bytes"' "$WORK/bad.sorted" >"$WORK/bad.utf8"
assert_files_equal <(LC_ALL=C sort "$WORK/listed") "$WORK/bad.utf8"
expect_exit 0 kdlq stats --dlq "kinesis:$D" "${AWS[@]}" --by stage --format ndjson
assert_eq "$(jq -c '[.stage, .count, .pending]' "$WORK/out")" "[\"kdlq-guard\",$BAD,$BAD]" "stats"

# --- usage errors, each one line --------------------------------------------------------
expect_exit 2 kdlq replay --dlq "kinesis:$D" "${AWS[@]}"
assert_eq "$(lines "$WORK/err")" 1 "lines of the diagnostic ($(cat "$WORK/err"))"
assert_contains "$WORK/err" "kdlq: error: --dlq 'kinesis:$D': a replay of a Kinesis dead-letter stream keeps its position in --state STORE"
expect_exit 2 kdlq purge --dlq "kinesis:$D" "${AWS[@]}" --replayed
assert_eq "$(cat "$WORK/err")" \
  "kdlq: error: --dlq 'kinesis:$D': a stream deletes nothing; its entries expire with its retention period" "purge"
expect_exit 2 kdlq replay --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --stage kdlq-guard
assert_contains "$WORK/err" "a filtered replay of a Kinesis dead-letter stream needs its own --group"
expect_exit 1 kdlq list --dlq "kinesis:$D-missing" "${AWS[@]}"
assert_eq "$(cat "$WORK/err")" \
  "kdlq: error: dead-letter store 'kinesis:$D-missing': stream '$D-missing' does not exist" "a missing stream"
expect_exit 1 kdlq guard --require .user --dlq "kinesis:$D-missing" "${AWS[@]}" </dev/null
assert_eq "$(cat "$WORK/err")" \
  "kdlq: error: dead-letter store 'kinesis:$D-missing': stream '$D-missing' does not exist" "a missing stream, at start"

# --- replay to standard output: the original lines, byte for byte ----------------------
expect_exit 0 kdlq replay --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" -v
assert_contains "$WORK/err" "replayed $BAD entries to <stdout>"
assert_files_equal <(LC_ALL=C sort "$WORK/out") "$WORK/bad.sorted"
expect_exit 0 kdlq replay --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" -v
assert_contains "$WORK/err" "replayed 0 entries to <stdout>"
assert_empty "$WORK/out"
expect_exit 0 kdlq stats --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --by stage --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[$BAD,0]" "the default ledger after the replay"

# --- into a topic, killed mid-way with SIGKILL, then run to the end: each entry once ----
# The broker answers slowly, so that the replay (a batch of 2 at a time)
# is still running when the topic holds its first records.
fault rtt all 100ms
replay_args=(--dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --group to-kafka --to "kafka:$F" -b "$BROKERS")
for k in 3 $((BAD / 2 + 1)); do
  kdlq replay "${replay_args[@]}" --batch 2 -v >>"$WORK/replay.log" 2>&1 &
  pid=$!
  kconsume -b "$BROKERS" -t "$F" -c "$k" >/dev/null 2>&1 &
  seen=$!
  # Whichever ends first: the consumer seeing K records (then the kill),
  # or the replay (done, or failed: the consumer would wait forever).
  wait -n "$pid" "$seen" || true
  kill -9 "$pid" "$seen" 2>/dev/null || true
  wait "$pid" "$seen" 2>/dev/null || true
done
fault rtt all 0
expect_exit 0 kdlq replay "${replay_args[@]}" -v
cat "$WORK/err" >>"$WORK/replay.log"
kconsume -b "$BROKERS" -t "$F" -e >"$WORK/got.ndjson"
assert_eq "$(lines "$WORK/got.ndjson")" "$BAD" "records in $F ($(cat "$WORK/replay.log"))"
jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/got.ndjson" | sort -u >"$WORK/ids"
assert_eq "$(lines "$WORK/ids")" "$BAD" "distinct replay ids in $F"
grep -vqE "^kinesis:$D:[0-9]+:[0-9]+$" "$WORK/ids" && fail "unexpected replay id: $(head -3 "$WORK/ids")"
# Plain lines come back as their bytes; envelopes as the records they were.
assert_eq "$(jq -r 'select(.key != null) | .key' "$WORK/got.ndjson" | sort | tr '\n' ' ')" \
  "k1 k2 k3 k4 k5 k6 " "keys of the envelopes replayed"
echo "killed replays: $(grep -c 'settled an interrupted replay' "$WORK/replay.log" || true) batches in doubt settled"

expect_exit 0 kdlq list --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --group to-kafka --format ndjson
assert_eq "$(jq -r 'select(.replayed | not) | .id' "$WORK/out")" "" "entries not replayed to $F"
assert_eq "$(lines "$WORK/out")" "$BAD" "entries listed after the replays"

# --- into another stream, killed twice with SIGKILL, then run to the end: each entry once -
# A stream's records carry no replay id: the ledger keeps how far entries
# were handed out, and a replay settles them by their records' content.
# Killed first with its third batch written and unanswered; then, after
# settling that one, with its own first batch so.
O="kpipe-$RUN_ID-dlq-out"
kinesis_stream "$O" 2
to_stream=(--dlq "kinesis:$D" --state "$STATE" --group to-stream --to "kinesis:$O" --batch 3 -v)
kill_held_replay 3 "${to_stream[@]}"
cat "$WORK/held.err" >>"$WORK/to-stream.log"
expect_exit 0 kdlq list --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --group to-stream --format ndjson
assert_eq "$(jq -r 'select(.replayed) | .id' "$WORK/out" | wc -l)" 6 "entries marked replayed by the killed replay"
kill_held_replay 1 "${to_stream[@]}"
cat "$WORK/held.err" >>"$WORK/to-stream.log"
expect_exit 0 kdlq list --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --group to-stream --format ndjson
assert_eq "$(jq -r 'select(.replayed) | .id' "$WORK/out" | wc -l)" 9 "entries marked replayed after the second kill"
expect_exit 0 kdlq replay "${to_stream[@]}" "${AWS[@]}"
cat "$WORK/err" >>"$WORK/to-stream.log"
assert_contains "$WORK/err" "settled an interrupted replay: 3 entries found at kinesis:$O and marked replayed"
assert_contains "$WORK/err" "replayed $((BAD - 12)) entries to kinesis:$O"
expect_exit 0 kconsume -t "kinesis:$O" --from earliest -e "${AWS[@]}" -q
cp "$WORK/out" "$WORK/got.ndjson"
assert_eq "$(lines "$WORK/got.ndjson")" "$BAD" "records in $O ($(cat "$WORK/to-stream.log"))"
assert_eq "$(jq -c '[.key, .value]' "$WORK/got.ndjson" | sort -u | wc -l)" "$BAD" "distinct records in $O"
assert_eq "$(jq -r 'select(.key | test("^k[0-9]+$")) | .key' "$WORK/got.ndjson" | sort | tr '\n' ' ')" \
  "k1 k2 k3 k4 k5 k6 " "keys of the envelopes replayed"
expect_exit 0 kdlq list --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --group to-stream --format ndjson
assert_eq "$(jq -r 'select(.replayed | not) | .id' "$WORK/out")" "" "entries not replayed to $O"
assert_eq "$(lines "$WORK/out")" "$BAD" "entries listed after the replays"
expect_exit 2 kdlq replay --dlq "kinesis:$D" "${AWS[@]}" --state "$STATE" --to "kinesis:$D"
assert_eq "$(cat "$WORK/err")" "kdlq: error: --to 'kinesis:$D' is the dead-letter stream itself" "into itself"

kinesis_api DeleteStream "$(stream_json "$O")" >/dev/null
kinesis_api DeleteStream "$(stream_json "$D")" >/dev/null
