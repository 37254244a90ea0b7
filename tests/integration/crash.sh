#!/usr/bin/env bash
# The checkpoint crash test: a pipeline of kconsume | kdedup | kwindow |
# kcheckpoint commit, all sharing one state (an SQLite file or a PostgreSQL
# database: lib.sh, store), is killed with SIGKILL at
# random moments six times and restarted each time; a last run with -e and
# --flush-at-end drains the topic. Taking the last line per window and
# key, the output equals kwindow over the deduplicated input in one clean
# pass: nothing lost, nothing counted twice.
source "$(dirname "$0")/lib.sh"
start_broker ev:16
T=$(topic ev)
G=$(group crash)
S=$(store state)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "crash test seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"
RANDOM=$seed

# 200k events, 3% of them repeats of earlier ones (a producer's retries),
# up to 2 s out of order, over 200 users and about 33 minutes of event
# time; 16 partitions keep kbroker under its 5 MiB per partition.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 200000 -k 200 -r 0.03 -j 2000 -s "$seed" >"$WORK/events.ndjson"
split -n l/6 -d "$WORK/events.ndjson" "$WORK/chunk."
# The first round's consumer needs something to read before its first
# checkpoint: a first piece goes in up front.
head -1 "$WORK/events.ndjson" | kproduce -b "$BROKERS" -t "$T" -k .user_id
sed -i 1d "$WORK/chunk.00"

# A real broker keeps a killed member in the group for the session
# timeout: keep it short, so that restarts are quick there too.
session=()
[[ "$KPIPE_TEST_BROKER" == kafka ]] && session=(-X session.timeout.ms=6000)

windows=(--time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count --agg sum:.value.amount
         --time-format ms --state "$S")

# The pipeline, as a script of its own run in a new process group, so that
# one SIGKILL reaches every stage at once. Arguments go to kconsume;
# KWINDOW_EXTRA to kwindow. With KILL_CHECKPOINTS and KILL_LINES, a shell
# loop after kconsume forwards every line and, once KILL_CHECKPOINTS
# checkpoint lines have gone by, kills the whole pipeline when KILL_LINES
# records have followed the newest checkpoint line: those records were read
# past every checkpoint that can be complete (the next one's line is still
# behind the loop), so the restart must read them again. The kill comes
# from inside, at the line: a kill from outside, timed by polling the
# state, often came when nothing was in flight.
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume "\$@" 2>>"$WORK/consume.err" |
  KILL_LOG="$WORK/killed" "$KPIPE_SOURCE_DIR/tests/integration/bin/kill_after_checkpoints" |
  kdedup --key .value.event_id --state "$S" 2>>"$WORK/dedup.err" |
  kwindow ${windows[*]} \${KWINDOW_EXTRA:-} 2>>"$WORK/window.err" |
  kcheckpoint commit --state "$S" --passthrough >>"$WORK/out.ndjson" 2>>"$WORK/commit.err"
PIPE

# Each round: start the pipeline, wait until it holds its partitions (its
# first checkpoint completes), then produce the round's events in pieces
# while it runs; the pipeline kills itself after 1 to 6 checkpoint lines
# and 1 to 2,000 records more. Should the round's records run out first,
# the kill comes from outside once they are all produced and read.
kills=0
for chunk in "$WORK"/chunk.*; do
  before=$(completed) killed_before=$(lines "$WORK/killed")
  KILL_CHECKPOINTS=$((1 + RANDOM % 6)) KILL_LINES=$((1 + RANDOM % 2000)) \
    run_pipeline -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 100ms "${session[@]}"
  wait_checkpoints $((before + 1))
  split -n l/10 -d "$chunk" "$chunk.piece."
  (for piece in "$chunk".piece.*; do kproduce -b "$BROKERS" -t "$T" -k .user_id "$piece"; done) &
  producer=$!
  wait "$producer" || fail "kproduce failed"
  # The records of this round are all in the topic: the pipeline dies on
  # its own, or is given 5 s to, then killed.
  deadline=$((SECONDS + 5))
  while kill -0 "$PIPELINE" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.02 # polling the pipeline: a session's leader can be waited on only once
  done
  # A pipeline that killed itself and was reaped has no process group
  # left: the kill then fails, and must not end the test (set -e).
  kill -KILL -- "-$PIPELINE" 2>/dev/null || true
  wait "$PIPELINE" 2>/dev/null || true
  # SIGKILL reaches every stage at once, but each takes its time to die:
  # the next round's kconsume would find the state file still locked.
  wait_for "every process of the round to end" 30 pipeline_gone
  torn=$(cut_torn_line "$WORK/out.ndjson")
  ((torn == 0)) || echo "the kill tore the last line written: $torn bytes cut"
  kills=$((kills + 1))
done
assert_eq "$kills" 6 "pipelines killed"

# Drain: read to the end, then fire every window still open.
KWINDOW_EXTRA=--flush-at-end run_pipeline -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 100ms \
  -e "${session[@]}"
wait "$PIPELINE" || fail "the last run failed: $(cat "$WORK"/*.err)"
cat "$WORK"/*.err >"$WORK/diagnostics"
grep -q 'too late' "$WORK/diagnostics" && fail "records were too late: $(cat "$WORK/diagnostics")"
grep -q 'error' "$WORK/diagnostics" && fail "errors: $(cat "$WORK/diagnostics")"

# The reference: the input deduplicated, then windowed, in one pass.
kdedup --key .event_id <"$WORK/events.ndjson" |
  kwindow --time .ts --key .user_id --tumble 1m --watermark 5s --agg count --agg sum:.amount --time-format ms \
    >"$WORK/clean.ndjson"
last_per_window() { jq -c '{k: [.window_start, .key], v: del(.emit)}' "$1" | jq -s -c 'map({(.k|tojson): .v}) | add | to_entries[] | .value' | sort; }
last_per_window "$WORK/out.ndjson" >"$WORK/got"
last_per_window "$WORK/clean.ndjson" >"$WORK/want"
[[ $(wc -l <"$WORK/want") -gt 5000 ]] || fail "the reference has only $(wc -l <"$WORK/want") windows"
assert_files_equal "$WORK/want" "$WORK/got"
# The kills did land mid-stream: the pipeline killed itself with records
# past every checkpoint that could be complete, at least once.
[[ -s "$WORK/killed" ]] || fail "no kill came with records in flight: every round ran out of records first"
expect_exit 0 kcheckpoint verify --state "$S"
echo "crash: ok ($(wc -l <"$WORK/killed") of $kills kills from inside: $(paste -sd';' "$WORK/killed"))"
