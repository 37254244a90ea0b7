#!/usr/bin/env bash
# A topic name Kafka would refuse is refused before any broker is asked
# (the broker below does not exist: the check must come first).
source "$(dirname "$0")/lib.sh"
run 2 kconsume -b 127.0.0.1:1 -t 'bad topic!' -e
expect_stderr "kconsume: error: invalid topic name 'bad topic!': only ASCII letters, digits, '.', '_' and '-' are allowed
"
run 2 kconsume -b 127.0.0.1:1 -t '' -e
[[ $(cat "$WORK/err") == *"topic"* ]] || fail "an empty topic name is not named: $(cat "$WORK/err")"

# -c 0 would never exit (0 meant no limit inside): refused.
run 2 kconsume -b 127.0.0.1:1 -t t -c 0
expect_stderr "kconsume: error: -c: the count must be at least 1
"

# kcheckpoint import refuses a topic Kafka could not hold, naming the line.
printf '%s\n' '{"topic":"","partition":0,"offset":1}' >"$WORK/offsets.ndjson"
run 65 kcheckpoint import --state "$WORK/s.db" "$WORK/offsets.ndjson"
[[ $(cat "$WORK/err") == "kcheckpoint: error: $WORK/offsets.ndjson: line 1: "*topic* ]] ||
  fail "an empty topic in import: $(cat "$WORK/err")"
