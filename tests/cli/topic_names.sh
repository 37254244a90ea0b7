#!/usr/bin/env bash
# A topic name Kafka would refuse is refused before any broker is asked
# (the broker below does not exist: the check must come first).
source "$(dirname "$0")/lib.sh"
run 2 kconsume -b 127.0.0.1:1 -t 'bad topic!' -e
expect_stderr "kconsume: error: invalid topic name 'bad topic!': only ASCII letters, digits, '.', '_' and '-' are allowed
"
run 2 kconsume -b 127.0.0.1:1 -t '' -e
[[ $(cat "$WORK/err") == *"topic"* ]] || fail "an empty topic name is not named: $(cat "$WORK/err")"
