#!/usr/bin/env bash
# -e in a consumer group is the group's end (kpipe(7), MANY INSTANCES).
# Two instances, a and b, are killed with records unread. a, started again
# with -e, is a static member: it gets its partitions back at once, without
# a rebalance, and reads them to their end; b's stay with b until its
# session times out. kconsume says which and waits up to --timeout: with
# a short one it exits 1 naming b's partitions (it used to exit 0, b's
# records unread); with a longer one it is given them once b's session has
# timed out, reads them, and exits 0 with everything read.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) does not keep a static member's partitions"
start_broker t:4
T=$(topic t)
G=$(group end)
S=$(store pipeline)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 8000 -k 40 -s 5 >"$WORK/events.ndjson"
total=$(wc -l <"$WORK/events.ndjson")
split -n l/2 -d "$WORK/events.ndjson" "$WORK/chunk."
produce() { kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/chunk.0$1" || fail "kproduce failed"; }

cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
set -o pipefail
name=\$1
shift
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --instance "\$name" -v -X session.timeout.ms=10000 "\$@" 2>>"$WORK/\$name.err" |
  kcheckpoint commit --state "$S" 2>>"$WORK/\$name.err"
PIPE
first=$(wc -l <"$WORK/chunk.00")
first_consumed() { (($(consumed) == first)); }

produce 0
start a
start b
for i in a b; do wait_for "instance $i to own partitions" 90 has_partitions "$i"; done
wait_for "the first half to be consumed" 60 first_consumed
# Both killed, with the second half unread.
kill_instance a
kill_instance b
produce 1

status=0
bash "$WORK/instance.sh" a -e --timeout 2s || status=$?
assert_eq "$status" 1 "kconsume -g -e's exit status while a dead member holds partitions short of their end"
grep -q "^kconsume: error: group '$G' is not at its end after 2s: $T \[[0-3]\] at offset [0-9]* of [0-9]*" "$WORK/a.err" ||
  fail "kconsume did not name the partitions short of their end: $(cat "$WORK/a.err")"
(($(consumed) < total)) || fail "a read everything: b's partitions were not b's"

bash "$WORK/instance.sh" a -e --timeout 60s || fail "kconsume -g -e did not wait for b's partitions: $(cat "$WORK/a.err")"
assert_eq "$(consumed)" "$total" "records consumed by the group"
echo "group_end: ok (a exited 1 naming b's partitions, then waited for them and read everything)"
