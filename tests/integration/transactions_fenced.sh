#!/usr/bin/env bash
# A zombie (kpipe(7), EXACTLY ONCE INTO KAFKA): two kproduce --transactional
# with one transactional id. The second to start fences the first: the
# first's open transaction is aborted, its next commit fails with a clear
# error and exit 1, and a read_committed reader sees nothing it wrote after
# it was fenced.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) shows read_committed readers the records of aborted transactions"
start_broker source:1 out:1
SRC=$(topic source)
OUT=$(topic out)
G=$(group fenced)
ID="$RUN_ID-txn"

checkpoint() {
  printf '{"$kpipe":"checkpoint","id":%d,"at":0,"group":"%s","offsets":[{"topic":"%s","partition":0,"offset":%d}]}\n' \
    "$1" "$G" "$SRC" "$2"
}
has_completed() { (($(completed "$1") >= $2)); }

# Each producer reads a fifo the test writes to, and keeps its own store:
# the same store would refuse the second at its lock before Kafka could.
A=$(store a) B=$(store b)
mkfifo "$WORK/a.fifo" "$WORK/b.fifo"
kproduce -b "$BROKERS" -t "$OUT" --transactional --transactional-id "$ID" --state "$A" \
  <"$WORK/a.fifo" >/dev/null 2>"$WORK/a.err" &
first=$!
exec 3>"$WORK/a.fifo"
printf '{"n":"a1"}\n{"n":"a2"}\n{"n":"a3"}\n' >&3
checkpoint 1 3 >&3
# Polling the store: kproduce completes the checkpoint there after Kafka's commit.
wait_for "the first producer's checkpoint 1" 60 has_completed "$A" 1
# Sent in a transaction that the second producer's start aborts.
printf '{"n":"a-open-1"}\n{"n":"a-open-2"}\n' >&3

kproduce -b "$BROKERS" -t "$OUT" --transactional --transactional-id "$ID" --state "$B" \
  <"$WORK/b.fifo" >/dev/null 2>"$WORK/b.err" &
second=$!
exec 4>"$WORK/b.fifo"
printf '{"n":"b1"}\n{"n":"b2"}\n' >&4
checkpoint 1 3 >&4
wait_for "the second producer's checkpoint 1" 60 has_completed "$B" 1

# The zombie goes on: its next commit is refused.
printf '{"n":"a-late"}\n' >&3
checkpoint 2 4 >&3
exec 3>&-
status=0
wait "$first" || status=$?
assert_eq "$status" 1 "the fenced producer's exit status"
grep -q "^kproduce: error: fenced: another producer with transactional id '$ID' has started" "$WORK/a.err" ||
  fail "the fenced producer did not say so: $(cat "$WORK/a.err")"
assert_eq "$(completed "$A")" 1 "checkpoints the fenced producer completed"

exec 4>&-
wait "$second" || fail "the second producer failed: $(cat "$WORK/b.err")"

kconsume -b "$BROKERS" -t "$OUT" -e --isolation read_committed --format value | jq -r .n | sort >"$WORK/committed"
printf '%s\n' a1 a2 a3 b1 b2 >"$WORK/want"
assert_files_equal "$WORK/want" "$WORK/committed"
echo "transactions_fenced: ok"
