#!/usr/bin/env bash
# The README's pipeline on a Kinesis stream, killed and restarted:
#   kconsume -t kinesis:S --state P | kdedup --state P | kwindow --state P ... |
#     kupsert --db P --table t --key window_start,key --state P
# with its state (P) in one store, is killed with SIGKILL, every stage at
# once, five times, each time from inside once its first checkpoint line
# and then 1 to 800 records more have gone by kconsume (wherever its later
# checkpoint lines fall), and restarted; kconsume resumes
# each shard after the sequence number of the newest complete checkpoint.
# A last run reads to the end (-e, kwindow --flush-at-end). Its table
# equals a clean run's on a store of its own, which equals the windows of
# the input deduplicated and windowed in one pass: nothing lost, nothing
# counted twice.
source "$(dirname "$0")/lib.sh"
[[ $KPIPE_TEST_STORE == postgres ]] || command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
S=$(store pipeline)
CLEAN=$(store clean)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "kinesis crash test seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"
RANDOM=$seed

stream_json() { jq -nc --arg s "$STREAM" '{StreamName: $s}'; }
kinesis_stream "$STREAM" 4

# 5000 events, 3% of them repeats of earlier ones (a producer's retries),
# up to 2 s out of order, over 50 users and about 17 minutes of event
# time (one every 200 ms): some 800 windows. All of them are in the stream
# before the first run: each run reads on from where the last left off.
N=5000
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 50 -r 0.03 -i 200 -j 2000 -s "$seed" >"$WORK/events.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user_id --endpoint "$KINESIS" "$WORK/events.ndjson"
# Where each record is, "PARTITION SEQUENCE", to count the records a
# checkpoint covers.
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e --endpoint "$KINESIS"
assert_eq "$(lines "$WORK/out")" "$N" "records in the stream"
jq -r '"\(.partition) \(.offset)"' "$WORK/out" >"$WORK/positions"
assert_eq "$(cut -d' ' -f1 "$WORK/positions" | sort -u | paste -sd,)" "0,1,2,3" "shards holding events"

# The pipeline, a script run in a session of its own (run_pipeline), so
# that one SIGKILL reaches every stage at once. ARGS go to kconsume;
# STATE names the store (the crash runs' or the clean run's), FINAL=1
# makes kwindow fire every open window at the end.
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
state=\${STATE:-$S}
kconsume -t "kinesis:$STREAM" --endpoint "$KINESIS" --state "\$state" --checkpoint-interval 100ms "\$@" \
    2>>"$WORK/consume.err" |
  bash "$WORK/killer.sh" |
  kdedup --key .value.event_id --state "\$state" 2>>"$WORK/dedup.err" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s \
    --agg count --agg amount=sum:.value.amount --time-format ms --state "\$state" \
    \${FINAL:+--flush-at-end} 2>>"$WORK/window.err" |
  kupsert --db "\$state" --table t --key window_start,key --state "\$state" 2>>"$WORK/upsert.err"
PIPE
# The kill: a loop after kconsume forwards every line and, with
# KILL_LINES, once the first checkpoint line and then KILL_LINES records
# have gone by, kills its session, which is the whole pipeline: the kill
# comes from inside, at a line, with records in flight in every stage
# (kill_after_checkpoints' way). Counted from the first checkpoint line:
# a checkpoint's interval (100ms) holds about a thousand records here,
# the stream's all being there to read at once, and counted from the
# newest one the kills would come after most of the stream. With
# KILL_AFTER_COMPLETE=1 (the first round) it holds the stream after that
# line until the store has a complete checkpoint, so that the restart
# resumes from one.
cat >"$WORK/killer.sh" <<'KILLER'
[[ -n "${KILL_LINES:-}" ]] || exec cat
checkpoint=false lines=0
while IFS= read -r line; do
  printf '%s\n' "$line"
  if ! $checkpoint; then
    [[ $line == '{"$kpipe":"checkpoint"'* ]] || continue
    checkpoint=true
    # Polling the store: nothing else says when kupsert has committed.
    # Past the deadline the kill goes ahead (the test fails below if no
    # checkpoint ever completes).
    deadline=$((SECONDS + 60))
    while ((${KILL_AFTER_COMPLETE:-0})) && (($(completed "$S") == 0 && SECONDS < deadline)); do sleep 0.01; done
  elif ((++lines >= KILL_LINES)); then
    echo "$lines records after the first checkpoint line" >>"$KILL_LOG"
    kill -KILL 0
  fi
done
KILLER
export -f completed sql is_postgres pg_conninfo
export S KILL_LOG="$WORK/killed"

# covered: how many of the stream's records the newest complete checkpoint
# covers (those at or before its shard's stored sequence number; compared
# as numbers of 56 digits: by length, then digit by digit).
covered() {
  sql --readonly "$S" "SELECT partition || ' ' || sequence FROM offsets" >"$WORK/stored" 2>/dev/null || : >"$WORK/stored"
  awk 'FILENAME == ARGV[1] { stored[$1] = $2 ""; next }
       $1 in stored { s = stored[$1]; q = $2 ""
                      if (length(q) < length(s) || (length(q) == length(s) && q <= s)) n++ }
       END { print n + 0 }' "$WORK/stored" "$WORK/positions"
}
# A round that runs out of records before its kill would wait for good:
# once its checkpoints cover the whole stream, it is killed from outside.
killed_or_caught_up() { pipeline_gone || (($(covered) == N)); }

: >"$WORK/kills"
from_inside=0
for kill in 1 2 3 4 5; do
  killed_before=$(lines "$WORK/killed")
  KILL_LINES=$((1 + RANDOM % 800)) KILL_AFTER_COMPLETE=$((kill == 1)) run_pipeline
  wait_for "round $kill's pipeline to kill itself or to read the whole stream" 90 killed_or_caught_up
  # A pipeline that killed itself has no process group left: the kill then
  # fails, and must not end the test (set -e).
  kill -KILL -- "-$PIPELINE" 2>/dev/null || true
  wait "$PIPELINE" 2>/dev/null || true
  # SIGKILL reaches every stage at once, but each takes its time to die:
  # the next round's kconsume would find the store still locked.
  wait_for "every process of round $kill to end" 30 pipeline_gone
  PIPELINE=""
  if (($(lines "$WORK/killed") > killed_before)); then
    from_inside=$((from_inside + 1))
    how="from inside, $(tail -n 1 "$WORK/killed")"
  else
    how="from outside, the stream read to its end"
  fi
  echo "kill $kill, $how: checkpoint $(completed "$S") complete, $(covered) records covered" >>"$WORK/kills"
done
cat "$WORK/kills"
# The kills came mid-stream, most with records in flight, and the
# restarts resumed from a checkpoint.
((from_inside >= 3)) || fail "only $from_inside of 5 kills came with records in flight: $(cat "$WORK/kills")"
(($(covered) > 0)) || fail "no checkpoint covers a record: $(cat "$WORK/kills") $(cat "$WORK"/*.err)"

# The last run, to the end; then the clean one, on a store of its own.
FINAL=1 run_pipeline -e
wait "$PIPELINE" || fail "the last run failed: $(cat "$WORK"/*.err)"
PIPELINE=""
mv "$WORK/consume.err" "$WORK/crash-consume.err"
STATE=$CLEAN FINAL=1 run_pipeline -e
wait "$PIPELINE" || fail "the clean run failed: $(cat "$WORK"/*.err)"
PIPELINE=""
cat "$WORK"/*.err >"$WORK/diagnostics"
if grep -E 'too late|error|warning' "$WORK/diagnostics"; then fail "a stage complained: $(cat "$WORK/diagnostics")"; fi

# The reference: the input deduplicated, then windowed, in one pass.
REF=$(store reference)
kdedup --key .event_id <"$WORK/events.ndjson" |
  kwindow --time .ts --key .user_id --tumble 1m --watermark 5s --agg count --agg amount=sum:.amount --time-format ms |
  kupsert --db "$REF" --table t --key window_start,key
# kwindow's "emit" is left out: after a restart a window may fire late
# where a clean run fired it on time, with the same aggregates.
query='SELECT window_start, window_end, key, count, amount FROM t ORDER BY window_start, key'
sql --readonly "$S" "$query" >"$WORK/crash.rows"
sql --readonly "$CLEAN" "$query" >"$WORK/clean.rows"
sql --readonly "$REF" "$query" >"$WORK/reference.rows"
(($(lines "$WORK/reference.rows") > 500)) || fail "the reference has only $(lines "$WORK/reference.rows") windows"
assert_files_equal "$WORK/clean.rows" "$WORK/reference.rows"
assert_files_equal "$WORK/crash.rows" "$WORK/clean.rows"
expect_exit 0 kcheckpoint verify --state "$S"

kinesis_api DeleteStream "$(stream_json)" >/dev/null
