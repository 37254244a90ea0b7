#!/usr/bin/env bash
# A partition without a leader for a while (an election after a broker
# crashed or stopped; kpipe(7), BROKER FAULTS): a program that asks for its
# offsets (klag, kconsume -e, and kcheckpoint reset, kjoin and kdlq through
# the same code) asks again until --timeout instead of failing at once, and
# goes on once a leader is back;
# past --timeout they exit 1 with one line that says how long they waited.
# A ListOffsets refused with NOT_LEADER_FOR_PARTITION is asked again
# without a word. Faults made with kbroker's --control.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "leaders taken away on demand are kbroker's (--control)"
start_fault_broker 2 events:2
events=$(topic events)
group=$(group lag)
awk 'BEGIN { for (n = 1; n <= 200; n++) printf "{\"k\":%d,\"n\":%d}\n", n % 7, n }' >"$WORK/in"
expect_exit 0 kproduce -b "$BROKERS" -t "$events" -k .k <"$WORK/in"
expect_exit 0 kconsume -b "$BROKERS" -t "$events" -g "$group" -e --format value
assert_eq "$(wc -l <"$WORK/out")" 200 "records read by the group"
# Both partitions hold records, so that each question below is about both.
expect_exit 0 kconsume -b "$BROKERS" -t "$events" -e --format envelope
assert_eq "$(jq -r .partition "$WORK/out" | sort -u | tr '\n' ' ')" "0 1 " "partitions with records"

fault leader "$events" 0 none

# Past --timeout: one line, naming the partition, the cause and the wait.
expect_exit 1 klag -b "$BROKERS" -g "$group" --timeout 2s --format ndjson
assert_eq "$(cat "$WORK/err")" \
  "klag: error: cannot list offsets: $events [0]: Broker: Leader not available, still after 2s" "klag's error"
assert_empty "$WORK/out"

# A leader back within --timeout: klag goes on, and its answer is whole.
# (-v says when it starts asking again: the leader comes back after that.)
klag -v -b "$BROKERS" -g "$group" --timeout 60s --format ndjson >"$WORK/lag.out" 2>"$WORK/lag.err" &
lag=$!
asking() { grep -q "^klag: $events \[0\]: Broker: Leader not available: asking again for up to 1m" "$WORK/lag.err"; }
wait_for "klag to ask again" 30 asking
fault leader "$events" 0 2
status=0
wait "$lag" || status=$?
assert_eq "$status" 0 "klag's exit status ($(cat "$WORK/lag.err"))"
assert_eq "$(jq -r 'select(.partition != null) | "\(.partition) \(.lag)"' "$WORK/lag.out" | tr '\n' ' ')" \
  "0 0 1 0 " "klag's lag per partition"
assert_eq "$(grep -c . "$WORK/lag.err")" 1 "lines klag said ($(cat "$WORK/lag.err"))"

# kconsume -e learns where each partition ends the same way: started while
# a partition has no leader, it waits, then reads every record once.
fault leader "$events" 1 none
kconsume -v -b "$BROKERS" -t "$events" -g "$(group drain)" -e --format value \
  >"$WORK/drain.out" 2>"$WORK/drain.err" &
drain=$!
consume_asking() { grep -q "^kconsume: $events \[1\]: Broker: Leader not available: asking again" "$WORK/drain.err"; }
wait_for "kconsume to ask again" 60 consume_asking
fault leader "$events" 1 1
status=0
wait "$drain" || status=$?
assert_eq "$status" 0 "kconsume's exit status ($(cat "$WORK/drain.err"))"
sort "$WORK/drain.out" >"$WORK/got"
sort "$WORK/in" >"$WORK/want"
assert_files_equal "$WORK/got" "$WORK/want"

# Refusals by a leader that has just moved: asked again, in silence.
fault error ListOffsets 4 NOT_LEADER_FOR_PARTITION
expect_exit 0 klag -b "$BROKERS" -g "$group" --timeout 10s --format ndjson
assert_empty "$WORK/err"
assert_eq "$(jq -r 'select(.partition != null) | .lag' "$WORK/out" | tr '\n' ' ')" "0 0 " "klag's lag"
echo "fault_no_leader: ok"
