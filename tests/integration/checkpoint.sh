#!/usr/bin/env bash
# The checkpoint protocol between kconsume and kcheckpoint: a pipeline
# resumes from its last complete checkpoint, SIGTERM stops it with a final
# checkpoint, two pipelines with their own state files do not interfere,
# complete checkpoints are mirrored into the consumer group, and a reset
# replays from the new offsets; a store a single pipeline began stays one
# under -g, and a fresh one is an instance's. The states are SQLite files
# or PostgreSQL databases (lib.sh, store).
source "$(dirname "$0")/lib.sh"
start_broker ev:4
T=$(topic ev)
S1=$(store one)
S2=$(store two)
S3=$(store three)
S4=$(store four)

"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 400 -k 50 | kproduce -b "$BROKERS" -t "$T" -k .user_id

# offsets_sum STATE: the sum of the stored offsets (records consumed).
offsets_sum() { kcheckpoint export --state "$1" | jq -s 'map(.offset) | add // 0'; }

# 1. SIGTERM: with an interval of an hour, the only checkpoint is the one
# kconsume writes when it is told to stop.
G=$(group term)
mkfifo "$WORK/out.fifo"
{
  kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S1" --checkpoint-interval 1h &
  echo $! >"$WORK/kconsume.pid"
  wait $!
} | kcheckpoint commit --state "$S1" --passthrough >"$WORK/out.fifo" &
pipeline=$!
exec 3<"$WORK/out.fifo"
# Wait for all 400 records to come through, line by line: synchronisation
# on the output itself.
for _ in $(seq 400); do IFS= read -r line <&3 || fail "the pipeline ended early"; echo "$line"; done >"$WORK/first"
assert_eq "$(offsets_sum "$S1")" 0 "no checkpoint before SIGTERM"
kill -TERM "$(cat "$WORK/kconsume.pid")"
cat <&3 >>"$WORK/first"
wait "$pipeline" || fail "the pipeline did not stop cleanly after SIGTERM"
exec 3<&-
assert_eq "$(wc -l <"$WORK/first")" 400 "records through the pipeline"
assert_eq "$(offsets_sum "$S1")" 400 "the final checkpoint covers every record"
assert_eq "$(kcheckpoint history --state "$S1" | jq -s 'map(select(.completed_at)) | length')" 1 "one complete checkpoint"

# The complete checkpoint was mirrored into the group: a plain consumer of
# the group has nothing left to read.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
assert_empty "$WORK/out"

# 2. A restart resumes from the state: only new records come (the same
# group: a state kept by partition, kpipe(7), MANY INSTANCES).
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 60 -k 50 -s 2 | kproduce -b "$BROKERS" -t "$T" -k .user_id
kconsume -b "$BROKERS" -t "$T" -g "$G" -e --state "$S1" --checkpoint-interval 50ms |
  kcheckpoint commit --state "$S1" --passthrough >"$WORK/second"
assert_eq "$(wc -l <"$WORK/second")" 60 "resumed run reads only the new records"
assert_eq "$(offsets_sum "$S1")" 460 "offsets after the resumed run"
# Checkpoint ids keep growing across restarts.
ids=$(kcheckpoint history --state "$S1" | jq -s -c 'map(.checkpoint)')
assert_eq "$(jq -c 'sort == . and (unique | length) == length' <<<"$ids")" true "checkpoint ids grow: $ids"

# 3. A second pipeline with its own state file and group is independent.
kconsume -b "$BROKERS" -t "$T" -g "$(group two)" -e --state "$S2" |
  kcheckpoint commit --state "$S2" --passthrough >"$WORK/other"
assert_eq "$(wc -l <"$WORK/other")" 460 "the other pipeline reads everything"
assert_eq "$(offsets_sum "$S1")" 460 "the first state is untouched"

# 4. Reset: the plan changes nothing without --execute; with it, the next
# run replays from the new offsets.
expect_exit 0 kcheckpoint reset --state "$S1" -b "$BROKERS" --shift-by -10 --format ndjson
assert_eq "$(jq -s 'map(.current - .offset) | add' "$WORK/out")" 40 "the plan moves 4 partitions back 10"
assert_contains "$WORK/err" "dry run"
assert_eq "$(offsets_sum "$S1")" 460 "a dry run changes nothing"
expect_exit 0 kcheckpoint reset --state "$S1" -b "$BROKERS" --shift-by -10 --execute
assert_eq "$(offsets_sum "$S1")" 420 "reset applied"
kconsume -b "$BROKERS" -t "$T" -g "$G" -e --state "$S1" | kcheckpoint commit --state "$S1" --passthrough >"$WORK/replay"
assert_eq "$(wc -l <"$WORK/replay")" 40 "the reset replays 10 records per partition"
expect_exit 0 kcheckpoint reset --state "$S1" -b "$BROKERS" --to-earliest --execute -t "$T:0"
assert_eq "$(kcheckpoint export --state "$S1" | jq -c 'select(.partition == 0) | .offset')" 0 "reset one partition"

# 5. Export and import round trip; verify finds nothing wrong.
kcheckpoint export --state "$S2" >"$WORK/export"
expect_exit 0 kcheckpoint import --state "$S3" "$WORK/export"
diff <(jq -c '[.topic, .partition, .offset]' "$WORK/export") \
  <(kcheckpoint export --state "$S3" | jq -c '[.topic, .partition, .offset]') || fail "import differs"
expect_exit 0 kcheckpoint verify --state "$S1"
# A state file is private to its owner (a database on a server has no
# file mode: PostgreSQL's own access rules apply there).
is_postgres "$S1" || assert_eq "$(stat -c %a "$S1")" 600 "state file mode"

# 6. A stage in between that drops control lines is noticed.
kconsume -b "$BROKERS" -t "$T" -e --state "$S4" | jq -c 'select(has("$kpipe") | not)' |
  kcheckpoint commit --state "$S4" 2>"$WORK/err" >/dev/null
assert_contains "$WORK/err" "no checkpoint line"
assert_contains "$WORK/err" "if has(\"\$kpipe\") then . else ... end"

# 7. A store a single pipeline completed checkpoints in (one that ran with
# -g before kpipe ran instances, or without -g) goes on as that pipeline
# under -g: its state cannot follow partitions, and an upgrade must not
# strand it (kpipe(7), MANY INSTANCES).
S5=$(store five)
kconsume -b "$BROKERS" -t "$T" -e --state "$S5" | kcheckpoint commit --state "$S5" --passthrough >/dev/null
kconsume -b "$BROKERS" -t "$T" -g "$(group single)" -e --state "$S5" 2>"$WORK/single.err" |
  kcheckpoint commit --state "$S5" --passthrough >"$WORK/single.out" || fail "the single pipeline under -g failed: $(cat "$WORK/single.err")"
assert_contains "$WORK/single.err" "holds the state of a single pipeline"
assert_eq "$(grep -c '"epoch"' "$WORK/single.out" || true)" 0 "epochs in the single pipeline's lines"
assert_eq "$(sql "$S5" "SELECT COUNT(*) FROM partition_owners")" 0 "partitions claimed"
# A fresh store under -g is an instance's: its partitions have owners.
S6=$(store six)
kconsume -b "$BROKERS" -t "$T" -g "$(group instance)" -e --state "$S6" 2>"$WORK/instance.err" |
  kcheckpoint commit --state "$S6" --passthrough >/dev/null
assert_eq "$(sql "$S6" "SELECT COUNT(*) FROM partition_owners")" 4 "partitions claimed by an instance"
expect_exit 1 kconsume -b "$BROKERS" -t "$T" -e --state "$S6"
assert_contains "$WORK/err" "keeps the state of a consumer group's instances by partition"
