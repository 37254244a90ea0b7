#!/usr/bin/env bash
# -e in a consumer group is the group's end (kpipe(7), MANY INSTANCES):
# kconsume -g G -e exits 0 only once every partition of its topics has its
# end committed in the group, by whichever member. While another member
# holds partitions short of their end (alive but slow, or killed and not
# yet timed out of the group), it says which and waits up to --timeout,
# then exits 1 naming them; never 0 with records unread.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) does not keep a slow member's partitions with it through a rebalance"
start_broker t:4
T=$(topic t)
G=$(group end)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 4000 -k 40 -s 5 >"$WORK/events.ndjson"
kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson" || fail "kproduce failed"

# A: a member with a slow reader (about 200 records a second: a rate, not
# a wait for anything), whose partitions stay short of their end for a
# while.
setsid bash -c "kconsume -b '$BROKERS' -t '$T' -g '$G' -v -X session.timeout.ms=6000 2>'$WORK/a.err' |
  while IFS= read -r line; do printf '%s\n' \"\$line\"; sleep 0.005; done >'$WORK/a.out'" &
a=$!
SESSIONS+=("$a")
a_assigned() { grep -qs "^kconsume: assigned" "$WORK/a.err"; }
wait_for "A to be assigned partitions" 60 a_assigned

# B, with a short --timeout: it reads its share to the end, then A's
# partitions are not at theirs: exit 1, naming them.
status=0
kconsume -b "$BROKERS" -t "$T" -g "$G" -e --timeout 2s -X session.timeout.ms=6000 >"$WORK/b.out" 2>"$WORK/b.err" || status=$?
assert_eq "$status" 1 "kconsume -g -e's exit status while another member is short of its partitions' end"
grep -q "^kconsume: error: group '$G' is not at its end after 2s: $T \[[0-3]\] at offset [0-9]* of [0-9]*" "$WORK/b.err" ||
  fail "kconsume did not name the partitions short of their end: $(cat "$WORK/b.err")"

# A killed: it may keep its partitions until its session times out; C
# waits for that (its --timeout is longer), is given them, reads them from
# what A committed, and ends with the group at its end.
kill -KILL -- "-$a"
kconsume -b "$BROKERS" -t "$T" -g "$G" -e --timeout 60s -v >"$WORK/c.out" 2>"$WORK/c.err" ||
  fail "kconsume -g -e did not wait for the dead member's partitions: $(cat "$WORK/c.err")"
# At least once: every event was read by A, B or C.
cat "$WORK/a.out" "$WORK/b.out" "$WORK/c.out" | jq -r .value.event_id | sort -u >"$WORK/got"
jq -r .event_id "$WORK/events.ndjson" | sort -u >"$WORK/want"
assert_files_equal "$WORK/want" "$WORK/got"
echo "group_end: ok (B read $(wc -l <"$WORK/b.out") and exited 1 naming the rest; C waited and read $(wc -l <"$WORK/c.out"))"
