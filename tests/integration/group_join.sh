#!/usr/bin/env bash
# A second kconsume joins a group while the first is reading: the group
# rebalances under them and both go on, sharing the partitions, nothing lost.
# On kbroker the group refuses commits during the rebalance; that is no
# error, and records are at most read again (at least once). Real Kafka
# takes the commits of the members leaving a generation, so nothing is read
# twice there.
source "$(dirname "$0")/lib.sh"
start_broker events:4
T=$(topic events)
G=$(group join)

produce() { "$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$1" -k 200 -s "$2" | kproduce -b "$BROKERS" -t "$T" -k .user_id; }
seen_count() { { complete "$WORK/a.out"; complete "$WORK/b.out"; } | cut -d, -f2,3 | sort -u | wc -l; }
seen_all() { (($(seen_count) == $1)); }

# No periodic commit: the first consumer first commits what it wrote when
# the rebalance takes its partitions away.
consumer=(kconsume -b "$BROKERS" -t "$T" -g "$G" --commit-interval 1h -v)

produce 2000 1
"${consumer[@]}" >"$WORK/a.out" 2>"$WORK/a.err" &
A=$!
wait_for "the first consumer to read the first records" 60 has_at_least "$WORK/a.out" 2000
"${consumer[@]}" >"$WORK/b.out" 2>"$WORK/b.err" &
B=$!
b_assigned() { grep -q "assigned $T" "$WORK/b.err"; }
wait_for "the second consumer's assignment" 60 b_assigned
produce 2000 2
wait_for "both to read every record" 60 seen_all 4000
kill -0 "$A" 2>/dev/null || fail "the first consumer died: $(cat "$WORK/a.err")"
[[ -s "$WORK/b.out" ]] || fail "the second consumer read nothing"
kill -TERM "$A" "$B"
for pid in "$A" "$B"; do
  status=0
  wait "$pid" || status=$?
  assert_eq "$status" 0 "exit status of a consumer (stderr: $(cat "$WORK/a.err" "$WORK/b.err"))"
done

expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
sort -u "$WORK/a.out" "$WORK/b.out" >"$WORK/both"
sort "$WORK/out" >"$WORK/topic"
assert_files_equal "$WORK/both" "$WORK/topic"
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  sort "$WORK/a.out" "$WORK/b.out" | uniq -d >"$WORK/repeated"
  assert_empty "$WORK/repeated"
fi
