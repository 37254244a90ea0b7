#!/usr/bin/env bash
# kproduce's bad input under each --on-error mode: fail names the input and
# the line and exits 65; dlq keeps the line whole with its reason; skip
# counts it; the good lines are produced in every mode. A record that the
# producer or the broker refuses for its own sake (a partition the topic
# lacks, too large) is bad input too, named by its line, also when the
# refusal comes back after later lines were sent.
source "$(dirname "$0")/lib.sh"
start_broker fail:1 dlq:1 skip:1 parts:2 big:1 ts:1 whole:1

printf '%s\n' '{"id":"a"}' 'not json' '{"id":"b"}' '{"no_id":1}' '{"id":"c"}' >"$WORK/in.ndjson"

expect_exit 65 kproduce -b "$BROKERS" -t "$(topic fail)" -k .id "$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: $WORK/in.ndjson: line 2: not valid JSON: 'not' is not a JSON value"

expect_exit 0 kproduce -b "$BROKERS" -t "$(topic dlq)" -k .id --on-error dlq --dlq "$WORK/dlq.db" <"$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: sent 2 lines to the dead-letter store $WORK/dlq.db"
assert_eq "$(sqlite3 "$WORK/dlq.db" "SELECT line, stage, reason, CAST(payload AS TEXT) FROM dead_letters ORDER BY id")" \
  "2|kproduce|line 2: not valid JSON: 'not' is not a JSON value|not json
4|kproduce|line 4: field '.id' is missing|{\"no_id\":1}"
assert_eq "$(stat -c %a "$WORK/dlq.db")" 600 "dead-letter store mode"
expect_exit 0 kconsume -b "$BROKERS" -t "$(topic dlq)" -e --format value
assert_eq "$(cat "$WORK/out")" $'{"id":"a"}\n{"id":"b"}\n{"id":"c"}' "good lines produced"

expect_exit 0 kproduce -b "$BROKERS" -t "$(topic skip)" -k .id --on-error skip "$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: skipped 2 bad lines"
expect_exit 0 kconsume -b "$BROKERS" -t "$(topic skip)" -e
assert_eq "$(wc -l <"$WORK/out")" 3 "skip: good lines produced"

expect_exit 2 kproduce -b "$BROKERS" -t "$(topic skip)" --on-error dlq
assert_eq "$(cat "$WORK/err")" "kproduce: error: --on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC"
expect_exit 2 kproduce -b "$BROKERS" -t "$(topic skip)" --on-error dpl
assert_eq "$(cat "$WORK/err")" "kproduce: error: unknown --on-error mode 'dpl', did you mean 'dlq'?"

# --- Records refused for their own sake (issue 15, item 2) ---------------------------

# envelope N PARTITION: a kconsume envelope from partition PARTITION.
envelope() { printf '{"topic":"src","partition":%s,"offset":%s,"timestamp":%s,"key":"k%s","value":{"n":%s}}\n' \
  "$2" "$1" "$((1764412345000 + $1))" "$1" "$1"; }
{ envelope 1 0; envelope 2 7; envelope 3 1; } >"$WORK/parts.ndjson"

# The topic exists: the producer knows its partitions, and refuses line 2
# before sending it. Nothing after it is produced.
parts=$(topic parts)
expect_exit 65 kproduce -b "$BROKERS" -t "$parts" --envelope --keep-partition <"$WORK/parts.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: <stdin>: line 2: topic '$parts' has no partition 7"
expect_exit 0 kconsume -b "$BROKERS" -t "$parts" -e --format value
assert_eq "$(cat "$WORK/out")" '{"n":1}' "fail: what was produced"

# A topic the broker creates when kproduce looks it up at start
# (kproduce(1), THE TOPIC): line 2 is refused as on a topic that existed,
# goes where --on-error says, and the other lines are produced. (A refusal
# that comes back late is produce_refused's.)
fresh=$(topic fresh-dlq)
expect_exit 0 kproduce -b "$BROKERS" -t "$fresh" --envelope --keep-partition --on-error dlq \
  --dlq "$WORK/refused.db" <"$WORK/parts.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: sent 1 line to the dead-letter store $WORK/refused.db"
assert_eq "$(sqlite3 "$WORK/refused.db" "SELECT input, line, reason, source_topic, source_partition,
  source_offset, CAST(payload AS TEXT) FROM dead_letters")" \
  "<stdin>|2|line 2: topic '$fresh' has no partition 7|src|7|2|$(envelope 2 7)"
expect_exit 0 kconsume -b "$BROKERS" -t "$fresh" -e --format value
assert_eq "$(sort "$WORK/out")" $'{"n":1}\n{"n":3}' "dlq: the other records produced"

fresh=$(topic fresh-skip)
expect_exit 0 kproduce -b "$BROKERS" -t "$fresh" --envelope --keep-partition --on-error skip "$WORK/parts.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: skipped 1 bad line"

fresh=$(topic fresh-fail)
expect_exit 65 kproduce -b "$BROKERS" -t "$fresh" --envelope --keep-partition "$WORK/parts.ndjson"
# Before it, maybe: how many lines after line 2 were in flight already.
assert_eq "$(tail -n 1 "$WORK/err")" \
  "kproduce: error: $WORK/parts.ndjson: line 2: topic '$fresh' has no partition 7"

# A record larger than message.max.bytes: bad input, the rest goes on.
{
  echo '{"n":1}'
  printf '{"n":2,"pad":"%s"}\n' "$(head -c 1500 /dev/zero | tr '\0' x)"
  echo '{"n":3}'
} >"$WORK/big.ndjson"
size=$(sed -n 2p "$WORK/big.ndjson" | tr -d '\n' | wc -c)
big=$(topic big)
expect_exit 65 kproduce -b "$BROKERS" -t "$big" -X message.max.bytes=1000 "$WORK/big.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kproduce: error: $WORK/big.ndjson: line 2: record of $size bytes is larger than message.max.bytes (1000)"
expect_exit 0 kproduce -b "$BROKERS" -t "$big" -X message.max.bytes=1000 --on-error dlq --dlq "$WORK/big.db" \
  <"$WORK/big.ndjson"
assert_eq "$(sqlite3 "$WORK/big.db" "SELECT line, reason, length(payload) FROM dead_letters")" \
  "2|line 2: record of $size bytes is larger than message.max.bytes (1000)|$size"
expect_exit 0 kconsume -b "$BROKERS" -t "$big" -e --format value
assert_eq "$(cat "$WORK/out")" $'{"n":1}\n{"n":1}\n{"n":3}' "big: the other records produced"

# --- Usage and envelopes kproduce cannot restore (issue 15, item 22) -----------------

expect_exit 2 kproduce -b "$BROKERS" -t "$big" -p -1
assert_eq "$(cat "$WORK/err")" "kproduce: error: -p -1: a partition is a number from 0"
expect_exit 2 kproduce -b "$BROKERS" -t 'bad topic!'
assert_eq "$(cat "$WORK/err")" \
  "kproduce: error: invalid topic name 'bad topic!': only ASCII letters, digits, '.', '_' and '-' are allowed"

ts=$(topic ts)
for bad in '{"timestamp":0,"value":1}' '{"timestamp":-5,"value":1}' '{"value":1,"value_base64":"AQ=="}' \
  '{"key":"k","key_base64":"AQ==","value":1}'; do
  printf '%s\n' '{"timestamp":1,"key":"first","value":1}' "$bad" >"$WORK/ts.ndjson"
  expect_exit 65 kproduce -b "$BROKERS" -t "$ts" --envelope "$WORK/ts.ndjson"
  case "$bad" in
    *'"timestamp":0'*) want="field 'timestamp' is 0, which librdkafka cannot produce (0 is now)" ;;
    *'"timestamp":-5'*) want="field 'timestamp' is negative (-5): Kafka timestamps count from the epoch" ;;
    *value_base64*) want="fields 'value' and 'value_base64' are both present" ;;
    *) want="fields 'key' and 'key_base64' are both present" ;;
  esac
  assert_eq "$(cat "$WORK/err")" "kproduce: error: $WORK/ts.ndjson: line 2: $want"
done
# A value that is an object is sent as JSON, so it must be JSON all of it,
# not only its brackets (found by tests/fuzz, json_reader).
printf '%s\n' '{"key":"good","value":{"x":1}}' '{"key":"bad","value":{"x":[1,nul]}}' >"$WORK/whole.ndjson"
whole=$(topic whole)
expect_exit 65 kproduce -b "$BROKERS" -t "$whole" --envelope "$WORK/whole.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kproduce: error: $WORK/whole.ndjson: line 2: not valid JSON: 'nul' is not a JSON value"
expect_exit 0 kconsume -b "$BROKERS" -t "$whole" -e --format value
assert_eq "$(cat "$WORK/out")" '{"x":1}' "whole: only the good value produced"

# The smallest timestamp kproduce takes comes back exactly.
expect_exit 0 kconsume -b "$BROKERS" -t "$ts" -e
assert_eq "$(jq -c '[.timestamp, .key, .value]' "$WORK/out" | sort -u)" '[1,"first",1]' "timestamp 1 restored"

# Records the broker never acknowledges are counted, and the exit is 1.
# The broker goes away mid-stream: kproduce reads from a fifo, so the
# moment is chosen by the test, not by a timer.
requires_kbroker_process() { [[ -n "$BROKER_PID" ]]; }
if requires_kbroker_process; then
  mkfifo "$WORK/feed"
  kproduce -b "$BROKERS" -t "$(topic skip)" -X message.timeout.ms=1500 <"$WORK/feed" >"$WORK/out" 2>"$WORK/err" &
  producer=$!
  exec 4>"$WORK/feed"
  echo '{"before":1}' >&4
  # Wait until the first record is in the topic: kbroker has it.
  expect_exit 0 kconsume -b "$BROKERS" -t "$(topic skip)" -c 4
  kill "$BROKER_PID"
  wait "$BROKER_PID" 2>/dev/null || true
  BROKER_PID=""
  echo '{"after":1}' >&4
  echo '{"after":2}' >&4
  exec 4>&-
  status=0
  wait "$producer" || status=$?
  assert_eq "$status" 1 "kproduce exit status when records are lost"
  grep -qE "^kproduce: error: 2 of 3 records not acknowledged by '$(topic skip)': " "$WORK/err" ||
    fail "undelivered records not reported: $(cat "$WORK/err")"
fi
