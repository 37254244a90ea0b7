#!/usr/bin/env bash
# kproduce's bad input under each --on-error mode: fail names the input and
# the line and exits 65; dlq keeps the line whole with its reason; skip
# counts it; the good lines are produced in every mode.
source "$(dirname "$0")/lib.sh"
start_broker fail:1 dlq:1 skip:1

printf '%s\n' '{"id":"a"}' 'not json' '{"id":"b"}' '{"no_id":1}' '{"id":"c"}' >"$WORK/in.ndjson"

expect_exit 65 kproduce -b "$BROKERS" -t "$(topic fail)" -k .id "$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: $WORK/in.ndjson: line 2: not valid JSON: invalid literal"

expect_exit 0 kproduce -b "$BROKERS" -t "$(topic dlq)" -k .id --on-error dlq --dlq "$WORK/dlq.db" <"$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: warning: sent 2 lines to the dead-letter store $WORK/dlq.db"
assert_eq "$(sqlite3 "$WORK/dlq.db" "SELECT line, stage, reason, CAST(payload AS TEXT) FROM dead_letters ORDER BY id")" \
  "2|kproduce|line 2: not valid JSON: invalid literal|not json
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
  grep -qE "^kproduce: error: 2 of 3 records not delivered to '$(topic skip)': " "$WORK/err" ||
    fail "undelivered records not reported: $(cat "$WORK/err")"
fi
