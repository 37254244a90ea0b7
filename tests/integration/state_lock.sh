#!/usr/bin/env bash
# Starting a whole pipeline twice on one state file went unnoticed: both
# kconsumes emitted the same checkpoint ids. The second kconsume --state is
# now refused, naming the first's pid, and so is kcheckpoint reset --execute
# while the pipeline runs (kpipe(7), CONTROL LINES AND CHECKPOINTS).
source "$(dirname "$0")/lib.sh"
start_broker ev:2
T=$(topic ev)
S=$WORK/p.db
printf '{"n":%d}\n' 1 2 3 4 | kproduce -b "$BROKERS" -t "$T"

mkfifo "$WORK/first.fifo"
kconsume -b "$BROKERS" -t "$T" --state "$S" >"$WORK/first.fifo" 2>"$WORK/first.err" &
first=$!
exec 3<"$WORK/first.fifo"
# kconsume takes its lock before it writes anything: its first line (the
# partitions it reads) is the synchronisation, no sleep needed.
IFS= read -r line <&3 || fail "the first kconsume ended early: $(cat "$WORK/first.err")"
cat <&3 >/dev/null &
exec 3<&-

expect_exit 1 kconsume -b "$BROKERS" -t "$T" --state "$S" -e
assert_empty "$WORK/out"
assert_eq "$(cat "$WORK/err")" "kconsume: error: state database '$S' is in use by process $first (the kconsume of a pipeline, or kcheckpoint rewriting its offsets): one pipeline per state file" "second kconsume"
expect_exit 1 kcheckpoint reset --state "$S" -b "$BROKERS" -t "$T" --to-earliest --execute
assert_eq "$(cat "$WORK/err")" "kcheckpoint: error: state database '$S' is in use by process $first (the pipeline's kconsume, or another kcheckpoint): stop the pipeline before rewriting its offsets" "reset while the pipeline runs"
# A dry run changes nothing: it may look.
expect_exit 0 kcheckpoint reset --state "$S" -b "$BROKERS" -t "$T" --to-earliest --format ndjson

kill -TERM "$first"
wait "$first" || fail "the first kconsume did not stop cleanly: $(cat "$WORK/first.err")"
# Its lock went with it.
expect_exit 0 kcheckpoint reset --state "$S" -b "$BROKERS" -t "$T" --to-earliest --execute
expect_exit 0 kconsume -b "$BROKERS" -t "$T" --state "$S" -e
expect_exit 0 kcheckpoint verify --state "$S"
