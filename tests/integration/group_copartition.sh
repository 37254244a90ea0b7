#!/usr/bin/env bash
# Co-partitioning (kpipe(7), MANY INSTANCES): an instance keeps dedup keys
# and windows per partition, which is exact only when a key's records are
# all in one partition. On a topic produced without a key (records spread
# over the partitions), kdedup and kwindow each warn once, naming a key,
# two partitions and the re-key command; on the same events keyed by user,
# neither does.
source "$(dirname "$0")/lib.sh"
start_broker spread:4 keyed:4
G=$(group copartition)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 4000 -k 20 -r 0.05 -s 3 >"$WORK/events.ndjson"
# Without a key, and without sticky batches, each record goes to a partition
# at random (librdkafka's partitioner).
kproduce -b "$BROKERS" -t "$(topic spread)" -X sticky.partitioning.linger.ms=0 "$WORK/events.ndjson"
kproduce -b "$BROKERS" -t "$(topic keyed)" -k .user_id "$WORK/events.ndjson"

# run TOPIC: an instance of the pipeline over the topic, to its end.
run() {
  local s
  s=$(store "$1")
  kconsume -b "$BROKERS" -t "$(topic "$1")" -g "$G-$1" --state "$s" -e 2>"$WORK/$1.consume.err" |
    kdedup -k .value.event_id --state "$s" 2>"$WORK/$1.dedup.err" |
    kwindow --time .value.ts --key .value.user_id --tumble 1m --state "$s" --flush-at-end 2>"$WORK/$1.window.err" |
    kcheckpoint commit --state "$s" >"$WORK/$1.out" 2>"$WORK/$1.commit.err" ||
    fail "the pipeline over $1 failed: $(cat "$WORK/$1".*.err)"
}

run spread
assert_eq "$(grep -c 'came from partitions' "$WORK/spread.dedup.err")" 1 "kdedup's warnings on the spread topic"
assert_eq "$(grep -c 'came from partitions' "$WORK/spread.window.err")" 1 "kwindow's warnings on the spread topic"
for err in "$WORK/spread.dedup.err" "$WORK/spread.window.err"; do
  assert_contains "$err" "re-key the topic by it first: kconsume -t $(topic spread) --format value | kproduce -t $(topic spread)-rekeyed"
done
assert_contains "$WORK/spread.dedup.err" "-k .event_id"
assert_contains "$WORK/spread.window.err" "-k .user_id"

run keyed
grep -h 'came from partitions' "$WORK"/keyed.*.err && fail "a warning on the topic keyed by user"
echo "group_copartition: ok"
