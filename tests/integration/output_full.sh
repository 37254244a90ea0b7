#!/usr/bin/env bash
# Output to a full disk (kpipe(7), EXIT STATUS): every program whose
# standard output is /dev/full exits 1 with one line naming it and the
# fault, and with --state no checkpoint completes past what was not
# written: kcheckpoint commit --passthrough into /dev/full completes none,
# and into a small file system that fills in the middle of the run only
# checkpoints whose records are all in the file, whole; after space is
# freed, a restart writes the rest, nothing lost.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "the fault is the output's, not the broker's"
private_mounts
start_broker ev:2 users:1 late:2
T=$(topic ev)
N=3000
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 40 -s 3 >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson"
kconsume -b "$BROKERS" -t "$T" -e >"$WORK/consumed.ndjson"
printf '%s\n' '{"key":"u1","value":{"user_id":"u1","name":"one"}}' |
  kproduce -b "$BROKERS" -t "$(topic users)" --envelope

# full PROGRAM ARGS...: PROGRAM, its standard output /dev/full, fails with
# exactly this one line and exit status 1.
full() {
  local got=0
  "$@" >/dev/full 2>"$WORK/err" </dev/null || got=$?
  [[ $got == 1 ]] || fail "'$*' into /dev/full exited $got, expected 1: $(cat "$WORK/err")"
  assert_eq "$(cat "$WORK/err")" "$1: error: cannot write '<stdout>': No space left on device" "'$*' into /dev/full"
}

S=$WORK/state.db
D=$WORK/dlq.db
kconsume -b "$BROKERS" -t "$T" -e --state "$S" | kcheckpoint commit --state "$S"
printf 'not json\n' | expect_exit 0 kdedup --key .value.event_id --dlq "$D"
G=$(group lag)
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e

full kconsume -b "$BROKERS" -t "$T" -e
full kdedup --key .value.event_id "$WORK/consumed.ndjson"
full kwindow --time .value.ts --key .value.user_id --tumble 1m --agg count --time-format ms \
  "$WORK/consumed.ndjson"
full kjoin -b "$BROKERS" --table "kafka:$(topic users)" --key .value.user_id --as .value.user \
  "$WORK/consumed.ndjson"
full kdlq guard --require .value.ts:time "$WORK/consumed.ndjson"
full kcheckpoint show --state "$S" --format ndjson
full kcheckpoint history --state "$S" --format table
full kcheckpoint export --state "$S"
full kdlq list --dlq "$D" --format ndjson
full kdlq replay --dlq "$D"
# The entry was not written out: it is still pending.
expect_exit 0 kdlq stats --dlq "$D" --format ndjson
assert_eq "$(jq -c '[.count, .pending]' "$WORK/out")" "[1,1]" "entries after a replay into /dev/full"
full klag -b "$BROKERS" -g "$G" --format ndjson

# The terminal stage into /dev/full completes no checkpoint, and a restart
# reads every record again.
P=$WORK/pipeline.db
got=0
kconsume -b "$BROKERS" -t "$T" -e --state "$P" --checkpoint-interval 10ms 2>"$WORK/consume.err" |
  kcheckpoint commit --state "$P" --passthrough >/dev/full 2>"$WORK/commit.err" || got=$?
assert_eq "$got" 1 "the pipeline's exit status"
assert_eq "$(cat "$WORK/commit.err")" "kcheckpoint: error: cannot write '<stdout>': No space left on device" \
  "kcheckpoint commit into /dev/full"
assert_eq "$(sql "$P" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL")" 0 \
  "complete checkpoints after /dev/full"
assert_eq "$(sql "$P" "SELECT COUNT(*) FROM offsets")" 0 "stored offsets after /dev/full"
kconsume -b "$BROKERS" -t "$T" -e --state "$P" | kcheckpoint commit --state "$P" --passthrough >"$WORK/again"
assert_eq "$(wc -l <"$WORK/again")" "$N" "records after the restart"

# A file system that fills in the middle of the run: 256 KiB, which takes
# the first 500 records (about 130 KiB) and their checkpoint, and then
# 2,500 more records come.
small_disk "$WORK/disk" 256k
L=$(topic late)
P=$WORK/filled.db
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 3000 -k 40 -s 4 >"$WORK/late.ndjson"
head -500 "$WORK/late.ndjson" | kproduce -b "$BROKERS" -t "$L" -k .user_id
{
  set +e # the statuses are the result
  kconsume -b "$BROKERS" -t "$L" --state "$P" --checkpoint-interval 20ms 2>"$WORK/consume.err" |
    kcheckpoint commit --state "$P" --passthrough >"$WORK/disk/out" 2>"$WORK/commit.err"
  echo "${PIPESTATUS[*]}" >"$WORK/status"
} &
wait_for "the first 500 records' checkpoint" 30 eval '(($(consumed "$P") == 500))'
tail -n +501 "$WORK/late.ndjson" | kproduce -b "$BROKERS" -t "$L" -k .user_id
wait_for "the pipeline to stop on the full file system" 30 test -s "$WORK/status"
assert_eq "$(cut -d' ' -f2 "$WORK/status")" 1 "kcheckpoint commit's exit status"
assert_eq "$(cat "$WORK/commit.err")" "kcheckpoint: error: cannot write '<stdout>': No space left on device" \
  "kcheckpoint commit into a full file system"
# Every record before a stored offset is in the file, whole.
cut_torn_line "$WORK/disk/out" >/dev/null
jq -r 'select(has("$kpipe") | not) | "\(.partition) \(.offset)"' "$WORK/disk/out" | sort -u >"$WORK/written"
sql "$P" 'SELECT partition, "offset" FROM offsets' | while IFS='|' read -r p o; do
  seq 0 $((o - 1)) | sed "s/^/$p /"
done | sort -u >"$WORK/covered"
assert_eq "$(wc -l <"$WORK/covered")" "$(consumed "$P")" "records the stored offsets cover"
missing=$(comm -13 "$WORK/written" "$WORK/covered" | wc -l)
assert_eq "$missing" 0 "records a complete checkpoint covers that are not in the file"
# Space freed (the output moved away), the rest comes.
mv "$WORK/disk/out" "$WORK/first"
kconsume -b "$BROKERS" -t "$L" -e --state "$P" | kcheckpoint commit --state "$P" --passthrough >"$WORK/rest"
cat "$WORK/first" "$WORK/rest" | jq -r 'select(has("$kpipe") | not) | "\(.partition) \(.offset)"' |
  sort -u | wc -l >"$WORK/count"
assert_eq "$(cat "$WORK/count")" 3000 "records after space was freed"
expect_exit 0 kcheckpoint verify --state "$P"
