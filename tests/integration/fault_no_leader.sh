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

# leader_back_while PARTITION BROKER CMD...: with PARTITION leaderless, runs
# CMD (given -v) in the background until it says it asks again about
# PARTITION, then makes BROKER its leader; CMD must then exit 0. Its output
# and diagnostics are in $WORK/cmd.out and $WORK/cmd.err.
leader_back_while() {
  local partition=$1 broker=$2 prog=$3 pid status=0
  shift 2
  fault leader "$events" "$partition" none
  "$@" >"$WORK/cmd.out" 2>"$WORK/cmd.err" &
  pid=$!
  asking() { grep -q "^$prog: $events \[$partition\]: Broker: Leader not available: asking again for up to 1m$" "$WORK/cmd.err"; }
  wait_for "$prog to ask again" 60 asking
  fault leader "$events" "$partition" "$broker"
  wait "$pid" || status=$?
  assert_eq "$status" 0 "$prog's exit status ($(cat "$WORK/cmd.err"))"
}

# A leader back within --timeout: klag goes on, and its answer is whole.
# (-v says when it starts asking again: the leader comes back after that.)
leader_back_while 0 2 klag -v -b "$BROKERS" -g "$group" --timeout 60s --format ndjson
assert_eq "$(jq -r 'select(.partition != null) | "\(.partition) \(.lag)"' "$WORK/cmd.out" | tr '\n' ' ')" \
  "0 0 1 0 " "klag's lag per partition"
assert_eq "$(grep -c . "$WORK/cmd.err")" 1 "lines klag said ($(cat "$WORK/cmd.err"))"

# kconsume -e learns where each partition ends the same way: started while
# a partition has no leader, it waits, then reads every record once.
leader_back_while 1 1 kconsume -v -b "$BROKERS" -t "$events" -g "$(group drain)" -e --format value --timeout 60s
sort "$WORK/cmd.out" >"$WORK/got"
sort "$WORK/in" >"$WORK/want"
assert_files_equal "$WORK/got" "$WORK/want"

# Refusals by a leader that has just moved: asked again, in silence.
fault error ListOffsets 4 NOT_LEADER_FOR_PARTITION
expect_exit 0 klag -b "$BROKERS" -g "$group" --timeout 10s --format ndjson
assert_empty "$WORK/err"
assert_eq "$(jq -r 'select(.partition != null) | .lag' "$WORK/out" | tr '\n' ' ')" "0 0 " "klag's lag"
echo "fault_no_leader: ok"
