#!/usr/bin/env bash
# Exactly once from Kafka to Kafka (kpipe(7), EXACTLY ONCE INTO KAFKA): the
# pipeline
#   kconsume -g G --state S | kdedup --state S | kproduce --transactional --state S
# is killed with SIGKILL at random moments six times and restarted, then
# run to the end with -e. A read_committed reader of the output topic sees
# each distinct event exactly once, each partition in its source order; a
# read_uncommitted reader sees the records of the transactions the kills
# aborted too (so the test can tell the two apart). At the end klag and
# kafka-consumer-groups agree that a read_committed group that has read the
# output to its end has no lag, transaction markers notwithstanding.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) shows read_committed readers the records of aborted transactions"
start_broker events:16 clean:16
SRC=$(topic events)
OUT=$(topic clean)
G=$(group pipeline)
S=$(store state)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "transactions test seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"
RANDOM=$seed

# 200k events, 3% of them repeats of earlier ones (a producer's retries),
# keyed by user, so that a repeat lands in its original's partition.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 200000 -k 200 -r 0.03 -s "$seed" >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$SRC" -k .user_id "$WORK/events.ndjson"

# A killed member stays in the group for the session timeout: keep it
# short, so that restarts are quick.
session=(-X session.timeout.ms=6000)

# The pipeline in a session of its own, so that one SIGKILL reaches every
# stage. With KILL_CHECKPOINTS and KILL_LINES, a shell loop after kconsume
# forwards every line and, once KILL_CHECKPOINTS checkpoint lines have gone
# by, kills the whole pipeline when KILL_LINES records more have: kproduce
# has sent those after the newest checkpoint line in a transaction that no
# checkpoint has committed.
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume -b "$BROKERS" -t "$SRC" -g "$G" --state "$S" --checkpoint-interval 100ms ${session[*]} "\$@" 2>>"$WORK/consume.err" |
  KILL_LOG="$WORK/killed" KILL_SINCE=first "$KPIPE_SOURCE_DIR/tests/integration/bin/kill_after_checkpoints" |
  kdedup --key .value.event_id --state "$S" 2>>"$WORK/dedup.err" |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" \
    >/dev/null 2>>"$WORK/produce.err"
PIPE
for round in 1 2 3 4 5 6; do
  killed_before=$(lines "$WORK/killed")
  KILL_CHECKPOINTS=$((1 + RANDOM % 3)) KILL_LINES=$((1 + RANDOM % 3000)) run_pipeline
  # The pipeline kills itself; 200k records are far more than six rounds
  # read (the shell loop keeps each to a few thousand records a
  # checkpoint).
  deadline=$((SECONDS + 120))
  while kill -0 "$PIPELINE" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "round $round: the pipeline was not killed within 120 s: $(cat "$WORK"/*.err)"
    sleep 0.05 # polling the pipeline: its own loop kills it, nothing else tells
  done
  wait "$PIPELINE" 2>/dev/null || true
  # SIGKILL reaches every stage at once, but each takes its time to die:
  # the next round's kconsume would find the state file still locked.
  wait_for "every process of round $round to end" 30 pipeline_gone
  (($(lines "$WORK/killed") > killed_before)) ||
    fail "round $round: the pipeline ended before it was killed: $(cat "$WORK"/*.err)"
done
PIPELINE=""

# To the end: read what is left, then exit.
bash "$WORK/pipeline.sh" -e || fail "the last run failed: $(cat "$WORK"/*.err)"
grep -q 'error' "$WORK"/*.err && fail "errors: $(cat "$WORK"/*.err)"

# The partition and event id of each record, each partition in offset order.
ids() { jq -r '[.partition, .value.event_id] | @tsv' | sort -s -n -k1,1; }
# What the output must be: the source, each event's first occurrence.
kconsume -b "$BROKERS" -t "$SRC" -e | ids | awk '!seen[$2]++' >"$WORK/want"
kconsume -b "$BROKERS" -t "$OUT" -e --isolation read_committed | ids >"$WORK/committed"
kconsume -b "$BROKERS" -t "$OUT" -e --isolation read_uncommitted | ids >"$WORK/uncommitted"
distinct=$(jq -r .event_id "$WORK/events.ndjson" | sort -u | wc -l)
assert_eq "$(lines "$WORK/want")" "$distinct" "distinct events in the source"
assert_files_equal "$WORK/want" "$WORK/committed"
# The kills aborted transactions with records in them: a reader that does
# not skip them sees more.
uncommitted=$(lines "$WORK/uncommitted")
((uncommitted > distinct)) ||
  fail "a read_uncommitted reader saw $uncommitted records, no more than the $distinct committed: no kill aborted a transaction with records"
assert_eq "$(sort -u "$WORK/uncommitted" | wc -l)" "$distinct" "distinct records a read_uncommitted reader saw"

# The pipeline's group: the transactions committed its offsets, to the end.
describe_group "$G" | awk '$5 != 0 { bad = 1 } END { exit bad }' ||
  fail "the pipeline's group has lag: $(describe_group "$G")"
expect_exit 0 kcheckpoint verify --state "$S"

# A read_committed group at the end of the output topic has no lag, though
# each transaction left a commit marker after its records in each
# partition: kconsume commits past them.
R=$(group reader)
kconsume -b "$BROKERS" -t "$OUT" -g "$R" -e --isolation read_committed >/dev/null 2>"$WORK/reader.err" ||
  fail "the reader failed: $(cat "$WORK/reader.err")"
describe_group "$R" >"$WORK/kafka-view"
assert_eq "$(lines "$WORK/kafka-view")" 16 "partitions kafka-consumer-groups describes"
awk '$5 != 0 { bad = 1 } END { exit bad }' "$WORK/kafka-view" || fail "kafka-consumer-groups shows lag: $(cat "$WORK/kafka-view")"
klag -b "$BROKERS" -g "$R" -t "$OUT" --format ndjson 2>/dev/null |
  jq -r 'select(.partition != null) | "\(.topic) \(.partition) \(.committed) \(.end) \(.lag)"' |
  sort -k1,1 -k2,2n >"$WORK/klag-view"
assert_files_equal "$WORK/kafka-view" "$WORK/klag-view"
# A consumer that committed the offset after its last record stands
# before the partition's last commit marker: kafka-consumer-groups counts
# the marker as lag, klag counts records (klag(1)) and shows none.
kafka_tool groups --reset-offsets --group "$R" --topic "$OUT" --shift-by -1 --execute >/dev/null ||
  fail "cannot move the reader's offsets back by one"
describe_group "$R" | awk '$5 != 1 { bad = 1 } END { exit bad }' ||
  fail "kafka-consumer-groups does not count the markers: $(describe_group "$R")"
klag -b "$BROKERS" -g "$R" -t "$OUT" --format ndjson 2>/dev/null |
  jq -r 'select(.partition != null) | "\(.lag) \(.end == .committed)"' | sort | uniq -c | xargs >"$WORK/klag-markers"
assert_eq "$(cat "$WORK/klag-markers")" "16 0 true" "klag's lag and end behind a marker, per partition"
echo "transactions: ok ($(lines "$WORK/killed") kills: $(paste -sd';' "$WORK/killed"); $((uncommitted - distinct)) aborted records seen read_uncommitted)"
