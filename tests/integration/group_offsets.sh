#!/usr/bin/env bash
# kconsume -g G -c N commits exactly what it wrote: Kafka's own
# kafka-consumer-groups tool then shows, for each partition, the offset after
# the last record written as CURRENT-OFFSET and the rest as LAG. A second run
# resumes there.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker has no group describe to compare with (kafka-consumer-groups)"
start_broker events:4
T=$(topic events)
G=$(group offsets)

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 1000 -k 300 | kproduce -b "$BROKERS" -t "$T" -k .user_id
# The topic's end offsets, partition by partition (no transactions, so each
# partition's records are offsets 0 to end-1).
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
jq -r '.partition' "$WORK/out" | sort -n | uniq -c | awk '{ print $2, $1 }' >"$WORK/ends"
assert_eq "$(wc -l <"$WORK/ends")" 4 "partitions holding records"

# expected FILE...: the describe lines the records in FILEs imply: the
# committed offset is one past the last record written from each partition.
expected() {
  cat "$@" | jq -r '"\(.partition) \(.offset)"' |
    awk -v t="$T" 'NR == FNR { end[$1] = $2; next }
                   { if (!($1 in next_) || $2 + 1 > next_[$1]) next_[$1] = $2 + 1 }
                   END { for (p in next_) print t, p, next_[p], end[p], end[p] - next_[p] }' "$WORK/ends" - |
    sort -k1,1 -k2,2n
}

expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -c 300
cp "$WORK/out" "$WORK/first"
assert_eq "$(lines "$WORK/first")" 300 "records written by the first run"
describe_group "$G" >"$WORK/described"
expected "$WORK/first" >"$WORK/expected"
assert_files_equal "$WORK/described" "$WORK/expected"
# Read from the start without a gap, the committed offsets add up to what
# was written.
assert_eq "$(awk '{ s += $3 } END { print s }' "$WORK/described")" 300 "sum of CURRENT-OFFSET"

# The second run starts where the first committed: nothing twice, nothing
# skipped, and the lag shrinks by what it wrote.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -c 500
cp "$WORK/out" "$WORK/second"
assert_eq "$(lines "$WORK/second")" 500 "records written by the second run"
cat "$WORK/first" "$WORK/second" | jq -r '"\(.partition) \(.offset)"' | sort -k1,1n -k2,2n >"$WORK/read"
uniq -d "$WORK/read" >"$WORK/repeated"
assert_empty "$WORK/repeated"
# From the start, each partition is read without a gap.
awk '$2 != seen[$1]++ { print "gap in partition " $1 " at offset " $2; bad = 1 } END { exit bad }' \
  "$WORK/read" || fail "records skipped"
describe_group "$G" >"$WORK/described"
expected "$WORK/first" "$WORK/second" >"$WORK/expected"
assert_files_equal "$WORK/described" "$WORK/expected"
