#!/usr/bin/env bash
# Records the broker refuses for their own sake, after they were sent: one
# over the topic's max.message.bytes, one over its segment.bytes, one
# without a key on a compacted topic. The broker judges a batch as a whole;
# kproduce sends the records of a refused batch again one by one, so that
# only the record at fault is bad input (named by its line, or
# dead-lettered) and the others are produced.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock) enforces neither a topic's max.message.bytes nor compaction"
start_broker
small=$(topic small)
compact=$(topic compact)
kafka_tool topics --create --topic "$small" --partitions 1 --config max.message.bytes=1000 >/dev/null
kafka_tool topics --create --topic "$compact" --partitions 1 --config cleanup.policy=compact >/dev/null

{
  echo '{"n":1}'
  printf '{"n":2,"pad":"%s"}\n' "$(head -c 1500 /dev/zero | tr '\0' x)"
  echo '{"n":3}'
} >"$WORK/big.ndjson"
# Under fail: line 2 is named; the records around it were in the same
# batch and are produced.
expect_exit 65 kproduce -b "$BROKERS" -t "$small" "$WORK/big.ndjson"
assert_eq "$(tail -n 1 "$WORK/err")" \
  "kproduce: error: $WORK/big.ndjson: line 2: the broker refused the record: message size too large"
expect_exit 0 kproduce -b "$BROKERS" -t "$small" --on-error dlq --dlq "$WORK/big.db" <"$WORK/big.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: sent 1 line to the dead-letter store $WORK/big.db"
assert_eq "$(sqlite3 "$WORK/big.db" "SELECT input, line, reason FROM dead_letters")" \
  "<stdin>|2|line 2: the broker refused the record: message size too large"
expect_exit 0 kconsume -b "$BROKERS" -t "$small" -e --format value
assert_eq "$(sort "$WORK/out" | uniq -c | awk '{ print $1, $2 }')" $'2 {"n":1}\n2 {"n":3}' "records produced"

printf '%s\n' '{"id":"a"}' '{"id":null}' '{"id":"c"}' >"$WORK/keys.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$compact" -k .id --on-error skip "$WORK/keys.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: skipped 1 bad line"
expect_exit 65 kproduce -b "$BROKERS" -t "$compact" -k .id "$WORK/keys.ndjson"
assert_eq "$(tail -n 1 "$WORK/err")" \
  "kproduce: error: $WORK/keys.ndjson: line 2: the broker refused the record: broker failed to validate record"
expect_exit 0 kconsume -b "$BROKERS" -t "$compact" -e --format value
assert_eq "$(sort "$WORK/out" | uniq -c | awk '{ print $1, $2 }')" $'2 {"id":"a"}\n2 {"id":"c"}' \
  "records with keys produced"

# A record larger than the topic's segment.bytes (issue 33, item 10): the
# broker refuses its batch as 'message batch larger than configured server
# segment size' (RECORD_LIST_TOO_LARGE), the sibling of 'message size too
# large', and the record is bad input as that one is; it used to stop
# kproduce with exit 1, naming no line. Kafka 4 takes no segment.bytes
# under 1 MiB, so the topic takes larger messages (max.message.bytes) and
# so does the producer (message.max.bytes).
segment=$(topic segment)
kafka_tool topics --create --topic "$segment" --partitions 1 --config segment.bytes=1048576 \
  --config max.message.bytes=3000000 >/dev/null
{
  echo '{"n":1}'
  printf '{"n":2,"pad":"%s"}\n' "$(head -c 1200000 /dev/zero | tr '\0' x)"
  echo '{"n":3}'
} >"$WORK/segment.ndjson"
size=$(sed -n 2p "$WORK/segment.ndjson" | tr -d '\n' | wc -c)
large=(-X message.max.bytes=3000000)
expect_exit 65 kproduce -b "$BROKERS" -t "$segment" "${large[@]}" "$WORK/segment.ndjson"
assert_eq "$(tail -n 1 "$WORK/err")" "kproduce: error: $WORK/segment.ndjson: line 2: the broker refused \
the record: message batch larger than configured server segment size"
expect_exit 0 kproduce -b "$BROKERS" -t "$segment" "${large[@]}" --on-error dlq --dlq "$WORK/segment.db" \
  <"$WORK/segment.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: sent 1 line to the dead-letter store $WORK/segment.db"
assert_eq "$(sqlite3 "$WORK/segment.db" "SELECT input, line, reason, length(payload) FROM dead_letters")" \
  "<stdin>|2|line 2: the broker refused the record: message batch larger than configured server segment size|$size"
expect_exit 0 kproduce -b "$BROKERS" -t "$segment" "${large[@]}" --on-error skip "$WORK/segment.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: skipped 1 bad line"
expect_exit 0 kconsume -b "$BROKERS" -t "$segment" -e --format value
assert_eq "$(sort "$WORK/out" | uniq -c | awk '{ print $1, $2 }')" $'3 {"n":1}\n3 {"n":3}' \
  "segment: the other records produced"
