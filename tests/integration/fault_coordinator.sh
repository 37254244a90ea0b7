#!/usr/bin/env bash
# A consumer group's coordinator moves to another broker while kconsume -g
# reads and commits: the old coordinator answers the member's heartbeat
# NOT_COORDINATOR, librdkafka finds the new one, and kconsume goes on
# reading and committing without a word; at SIGTERM it commits what it
# wrote and exits 0. A second run of the group then starts where the first
# ended: every record read once, nothing lost, nothing twice. The move is
# made with kbroker's --control; the consumer's librdkafka debug log (-vv
# -X debug=cgrp) is how the test knows the client has seen it.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "coordinator moves on demand are kbroker's (--control)"
start_fault_broker 3 events:4
T=$(topic events)
G=$(group moved)

produce() { "$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$1" -k 200 -s "$2" | kproduce -b "$BROKERS" -t "$T" -k .user_id; }
coordinator_is() { grep -q "Group \"$G\" changing coordinator $1 -> $2\$" "$WORK/a.err"; }
first_coordinator() { sed -n "s/.*Group \"$G\" changing coordinator -1 -> \([0-9]*\)\$/\1/p" "$WORK/a.err" | head -n 1; }

produce 500 1
kconsume -b "$BROKERS" -t "$T" -g "$G" --commit-interval 200ms -vv -X debug=cgrp >"$WORK/a.out" 2>"$WORK/a.err" &
A=$!
wait_for "the first records" 30 has_at_least "$WORK/a.out" 500
from=$(first_coordinator)
[[ "$from" =~ ^[123]$ ]] || fail "no coordinator in kconsume's log: $(grep -v HEARTBEAT "$WORK/a.err" | tail -n 5)"
to=$((from % 3 + 1))
fault coordinator group "$G" "$to"
wait_for "kconsume to find the new coordinator" 20 coordinator_is "$from" "$to"
produce 500 2
wait_for "the records after the move" 30 has_at_least "$WORK/a.out" 1000
kill -TERM "$A"
status=0
wait "$A" || status=$?
grep -E '^kconsume: (warning|error): ' "$WORK/a.err" >"$WORK/a.said" || true
assert_eq "$status" 0 "kconsume's exit status ($(cat "$WORK/a.said"))"
# No warning, no error, and no rebalance: the partitions were assigned
# once, at the start.
assert_empty "$WORK/a.said"
assert_eq "$(grep -c "^kconsume: assigned $T " "$WORK/a.err")" 4 "partitions assigned"

# The group resumes where the first run committed: only the new records.
produce 300 3
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
cp "$WORK/out" "$WORK/b.out"
assert_eq "$(lines "$WORK/b.out")" 300 "records the second run read ($(cat "$WORK/err"))"
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
sort "$WORK/a.out" "$WORK/b.out" >"$WORK/both"
sort "$WORK/out" >"$WORK/topic"
assert_files_equal "$WORK/both" "$WORK/topic"
