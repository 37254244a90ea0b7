#!/usr/bin/env bash
# kproduce to a topic that does not exist, in both modes alike (kproduce(1),
# THE TOPIC; issue 33, item 8). Asked about it, the broker creates it when
# its auto.create.topics.enable says so (the default, which scripts/kafka's
# broker keeps, and kbroker's mock): kproduce waits for it and produces. Not
# created (here the producer's allow.auto.create.topics=false, to which a
# broker answers as one without auto-creation does), it does not exist:
# both modes say so before a line is read, and nothing created it.
# --transactional used to create the topic with its first question, then
# say that it did not exist, and exit 1.
source "$(dirname "$0")/lib.sh"
start_broker src:2
SRC=$(topic src)
printf '%s\n' '{"n":1}' '{"n":2}' '{"n":3}' >"$WORK/in.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$SRC" "$WORK/in.ndjson"

# consumed TOPIC: the values in TOPIC, sorted; fails when it does not exist.
consumed() {
  expect_exit 0 kconsume -b "$BROKERS" -t "$1" -e --format value
  sort "$WORK/out"
}

plain=$(topic plain)
expect_exit 0 kproduce -b "$BROKERS" -t "$plain" "$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "" "plain: stderr"
assert_eq "$(consumed "$plain")" "$(cat "$WORK/in.ndjson")" "plain: records produced"

# --transactional at the end of a checkpointed pipeline: the first run
# commits every record.
tx=$(topic tx)
S=$(store state)
G=$(group tx)
kconsume -b "$BROKERS" -t "$SRC" -g "$G" --state "$S" -e 2>"$WORK/consume.err" |
  kproduce -b "$BROKERS" -t "$tx" --envelope --transactional --state "$S" >"$WORK/out" 2>"$WORK/err" ||
  fail "transactional: exited $?: $(cat "$WORK/consume.err" "$WORK/err")"
assert_eq "$(cat "$WORK/err")" "" "transactional: stderr"
assert_eq "$(consumed "$tx")" "$(cat "$WORK/in.ndjson")" "transactional: records committed"

# Not created: said at once in both modes, however much input waits (it
# used to take the plain mode 30 s, topic.metadata.propagation.max.ms, to
# say that records were not acknowledged), and the topic stays missing.
no_create=(-X allow.auto.create.topics=false)
for mode in plain tx; do
  missing=$(topic "missing-$mode")
  args=()
  [[ $mode == plain ]] || args=(--transactional --state "$(store "missing-$mode")")
  expect_exit 1 kproduce -b "$BROKERS" -t "$missing" "${no_create[@]}" "${args[@]}" "$WORK/in.ndjson"
  assert_eq "$(cat "$WORK/err")" \
    "kproduce: error: topic '$missing' does not exist (allow.auto.create.topics is false)" "$mode: missing"
  expect_exit 1 kconsume -b "$BROKERS" -t "$missing" -e
  assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$missing' does not exist" "$mode: not created"
done

# -p names a partition of the topic as the broker made it: kbroker and
# scripts/kafka's broker give a new topic 4 (kproduce(1), --partition).
fixed=$(topic fixed)
expect_exit 2 kproduce -b "$BROKERS" -t "$fixed" -p 9 "$WORK/in.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: topic '$fixed' has no partition 9" "-p on a new topic"
