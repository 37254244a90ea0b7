#!/usr/bin/env bash
# A broker that goes away mid-stream is said once it has been out of reach
# for --timeout, with librdkafka's reason, and its return is said too;
# kconsume goes on reading afterwards. (It used to be a minute of silence,
# even under -v.) The outage is kbroker's: SIGUSR1 takes its brokers down,
# SIGUSR2 brings them back.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "the outage is made with kbroker's SIGUSR1 and SIGUSR2; the shared Kafka is never stopped"
start_broker events:1
events=$(topic events)
echo '{"n":1}' | kproduce -b "$BROKERS" -t "$events"

kconsume -b "$BROKERS" -t "$events" --timeout 1s --format value >"$WORK/got" 2>"$WORK/said" &
consumer=$!
has() { grep -qF -- "$2" "$1"; }
wait_for "the first record" 30 has "$WORK/got" '{"n":1}'
kill -USR1 "$BROKER_PID"
wait_for "the outage to be said" 30 has "$WORK/said" "cannot reach broker '$BROKERS' for "
kill -USR2 "$BROKER_PID"
wait_for "the return to be said" 60 has "$WORK/said" "broker '$BROKERS' is reachable again after "
echo '{"n":2}' | kproduce -b "$BROKERS" -t "$events"
wait_for "the record after the outage" 30 has "$WORK/got" '{"n":2}'
kill -TERM "$consumer"
status=0
wait "$consumer" || status=$?
assert_eq "$status" 0 "kconsume's exit status"
# Said once each; nothing else.
assert_eq "$(wc -l <"$WORK/said")" 2 "lines on standard error ($(cat "$WORK/said"))"
[[ "$(head -n 1 "$WORK/said")" =~ ^kconsume:\ warning:\ cannot\ reach\ broker\ \'$BROKERS\'\ for\ [0-9]+s:\ .+\;\ still\ trying$ ]] ||
  fail "the outage warning: $(head -n 1 "$WORK/said")"
[[ "$(tail -n 1 "$WORK/said")" =~ ^kconsume:\ warning:\ broker\ \'$BROKERS\'\ is\ reachable\ again\ after\ [0-9]+s$ ]] ||
  fail "the return warning: $(tail -n 1 "$WORK/said")"
assert_eq "$(cat "$WORK/got")" $'{"n":1}\n{"n":2}' "records read"
