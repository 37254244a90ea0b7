#!/usr/bin/env bash
# Two kconsume processes in one group share a four-partition topic; one
# leaves (SIGTERM) while records are flowing and the other takes over its
# partitions from what it committed. Together they write every record of the
# topic, and since the one that left committed exactly what it had written,
# none twice.
source "$(dirname "$0")/lib.sh"
# kbroker's group coordinator (librdkafka's mock) refuses offset commits
# while a group rebalances, where Kafka takes them from the members of the
# ending generation, and after a member leaves it only rebalances once the
# session timeout has passed: the handoff there is neither exact nor quick.
requires_broker kafka "an exact group handoff (kbroker refuses commits during rebalances)"
start_broker events:4
T=$(topic events)
G=$(group takeover)

produce() { "$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$1" -k 200 -s "$2" | kproduce -b "$BROKERS" -t "$T" -k .user_id; }
# "PARTITION OFFSET" of every record both consumers wrote, once each.
seen() { { complete "$WORK/a.out"; complete "$WORK/b.out"; } | cut -d, -f2,3 | sort -u; }
seen_count() { seen | wc -l; }
seen_all() { (($(seen_count) == $1)); }

produce 400 1
kconsume -b "$BROKERS" -t "$T" -g "$G" -v >"$WORK/a.out" 2>"$WORK/a.err" &
A=$!
wait_for "the first consumer to read the first 400 records" 60 has_at_least "$WORK/a.out" 400

# The second joins: the group rebalances and each gets two partitions.
kconsume -b "$BROKERS" -t "$T" -g "$G" -v >"$WORK/b.out" 2>"$WORK/b.err" &
B=$!
b_assigned() { grep -q "assigned $T" "$WORK/b.err"; }
wait_for "the second consumer's assignment" 60 b_assigned
produce 400 2
wait_for "both to read the next 400 records" 60 seen_all 800
[[ -s "$WORK/b.out" ]] || fail "the second consumer read nothing after joining"
a_share=$(tail -n +401 "$WORK/a.out" | cut -d, -f2 | sort -u | paste -sd' ')
b_share=$(cut -d, -f2 "$WORK/b.out" | sort -u | paste -sd' ')
[[ -n "$a_share" ]] || fail "the first consumer kept no partition after the rebalance"
for p in $b_share; do
  [[ " $a_share " != *" $p "* ]] || fail "partition $p was read by both consumers (A: $a_share; B: $b_share)"
done

# The first leaves while 20000 more records are being written and read.
a_before=$(lines "$WORK/a.out")
produce 20000 3 &
P=$!
wait_for "the first consumer to read part of the next batch" 60 has_at_least "$WORK/a.out" $((a_before + 1))
kill -TERM "$A"
a_status=0
wait "$A" || a_status=$?
assert_eq "$a_status" 0 "exit status of the consumer that left"
wait "$P" || fail "kproduce failed"
grep -q "partitions revoked" "$WORK/a.err" || fail "the first consumer did not leave the group: $(cat "$WORK/a.err")"

# After it left, the second reads everything that arrives, on all four
# partitions.
b_before=$(lines "$WORK/b.out")
produce 400 4
wait_for "the second consumer to take over" 60 seen_all 21200
kill -TERM "$B"
b_status=0
wait "$B" || b_status=$?
assert_eq "$b_status" 0 "exit status of the second consumer"
assert_eq "$(tail -n +$((b_before + 1)) "$WORK/b.out" | cut -d, -f2 | sort -u | wc -l)" 4 \
  "partitions the second consumer read after the first left"

# No loss: together they wrote the topic's records exactly (compared whole,
# with kconsume outside any group as the reference); no repeats.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
assert_eq "$(lines "$WORK/out")" 21200 "records in the topic"
sort "$WORK/a.out" "$WORK/b.out" >"$WORK/both.sorted"
sort "$WORK/out" >"$WORK/topic.sorted"
uniq -d "$WORK/both.sorted" >"$WORK/repeated"
assert_empty "$WORK/repeated"
assert_files_equal "$WORK/both.sorted" "$WORK/topic.sorted"

# What they committed is everything: the group has nothing left to read.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
assert_empty "$WORK/out"
