#!/usr/bin/env bash
# kproduce rides out a partition leader that moves and Produce requests
# refused with NOT_LEADER_FOR_PARTITION (librdkafka looks the leader up
# again and retries; the producer is idempotent, kproduce(1)): it exits 0
# and every record is in the topic exactly once, in the order of its key's
# lines. Faults made with kbroker's --control.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "errors and leader moves on demand are kbroker's (--control)"
start_fault_broker 3 events:4
events=$(topic events)
awk 'BEGIN { for (n = 1; n <= 2000; n++) printf "{\"k\":%d,\"n\":%d}\n", n % 50, n }' >"$WORK/in"

mkfifo "$WORK/feed"
kproduce -b "$BROKERS" -t "$events" -k .k <"$WORK/feed" >"$WORK/produce.out" 2>"$WORK/produce.err" &
producer=$!
exec 7>"$WORK/feed"
# The first three Produce requests, whichever broker they reach, are refused.
fault error Produce 3 NOT_LEADER_FOR_PARTITION
head -n 1000 "$WORK/in" >&7
# Once the first half is in the topic, kproduce knows the leaders: move
# every partition to broker 3 (at least two of them move), then to 2.
timeout 30 kconsume -b "$BROKERS" -t "$events" -c 1000 --format value >"$WORK/first" ||
  fail "the first half did not arrive: $(cat "$WORK/produce.err")"
for p in 0 1 2 3; do fault leader "$events" "$p" 3; done
sed -n '1001,1500p' "$WORK/in" >&7
timeout 30 kconsume -b "$BROKERS" -t "$events" -c 1500 --format value >/dev/null ||
  fail "the second part did not arrive: $(cat "$WORK/produce.err")"
for p in 0 1 2 3; do fault leader "$events" "$p" 2; done
fault error Produce 2 NOT_LEADER_FOR_PARTITION
sed -n '1501,$p' "$WORK/in" >&7
exec 7>&-
status=0
wait "$producer" || status=$?
assert_eq "$status" 0 "kproduce's exit status ($(cat "$WORK/produce.err"))"
assert_empty "$WORK/produce.err"

# Every record once: nothing lost, nothing twice.
expect_exit 0 kconsume -b "$BROKERS" -t "$events" -e --format value
sort "$WORK/out" >"$WORK/got"
sort "$WORK/in" >"$WORK/want"
assert_files_equal "$WORK/got" "$WORK/want"
# Each key's records in the order of their lines.
jq -r '"\(.k) \(.n)"' "$WORK/out" | awk '$2 < last[$1] { print "key " $1 ": " $2 " after " last[$1]; bad = 1 } { last[$1] = $2 } END { exit bad }' ||
  fail "records of a key out of order"
