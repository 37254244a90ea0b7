#!/usr/bin/env bash
# The join crash test: the pipeline
#   kconsume --state S | kjoin --table kafka:USERS ... --state S | kcheckpoint commit --state S --passthrough
# is killed with SIGKILL, whole, at random moments four times and restarted
# each time; a last run with -e drains the stream. Between runs (never
# during one) the users table changes: updates, tombstones, keys new and
# keys back. kjoin restores its table from the checkpoint and catches up
# from the saved offsets before it passes a record, so every line a run
# writes carries the row its user had in the table as it stood when that
# run started: checked line by line, byte for byte. Across all runs every
# stream record comes out (at least once: a record after the last complete
# checkpoint is read again by the next run).
source "$(dirname "$0")/lib.sh"
start_broker ev:4 users:2
T=$(topic ev)
U=$(topic users)
S=$(store state)
seed=${KPIPE_CRASH_SEED:-$RANDOM}
echo "join crash test seed: $seed (rerun with KPIPE_CRASH_SEED=$seed)"
RANDOM=$seed

# 36k events over 250 users (u000000..u000249); the table knows at most the
# first 212. Four rounds of stream, the first event produced up front so that the first
# run has something to read before its first checkpoint.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 36000 -k 250 -s "$seed" >"$WORK/events.ndjson"
split -n l/4 -d "$WORK/events.ndjson" "$WORK/chunk."
head -1 "$WORK/events.ndjson" | kproduce -b "$BROKERS" -t "$T" -k .user_id
sed -i 1d "$WORK/chunk.00"

# The table's changes, batch R before run R (batch 4 before the drain):
# rows with their generation, keyed by user_id (kproduce -k), then
# tombstones (envelopes). ops.R logs them as [key, row or null], in order.
users() { jq -nc "range($1) | select($2) | \"u\\(. + 1000000 | tostring | .[1:])\""; }
table_batch() {
  local r=$1 sel_rows sel_tombs
  case $r in
    0) sel_rows='true' sel_tombs='. % 10 == 0' n=200 ;;
    *) sel_rows=". % 6 == $((r % 6))" sel_tombs=". % 13 == $r" n=$((200 + 3 * r)) ;;
  esac
  users "$n" "$sel_rows" | jq -c --argjson gen "$r" '{user_id: ., name: ("name of " + .), gen: $gen}' \
    >"$WORK/rows.$r"
  users "$n" "$sel_tombs" | jq -c '{key: ., value: null}' >"$WORK/tombs.$r"
  expect_exit 0 kproduce -b "$BROKERS" -t "$U" -k .user_id "$WORK/rows.$r"
  expect_exit 0 kproduce -b "$BROKERS" -t "$U" --envelope "$WORK/tombs.$r"
  {
    jq -c '[.user_id, .]' "$WORK/rows.$r"
    jq -c '[.key, null]' "$WORK/tombs.$r"
  } >"$WORK/ops.$r"
  # The table as it stands now: {key: row}.
  cat "$WORK"/ops.[0-$r] | jq -s -c 'reduce .[] as [$k, $v] ({}; if $v == null then del(.[$k]) else .[$k] = $v end)' \
    >"$WORK/table.$r"
}

# One pipeline, not a consumer group's instance: kjoin --state keeps its
# state whole (kpipe(7), MANY INSTANCES).

# The pipeline, as a script of its own run in a new session, so that one
# SIGKILL reaches every stage at once. Arguments go to kconsume. With
# KILL_CHECKPOINTS and KILL_LINES, a shell loop after kconsume forwards
# every line and, once KILL_CHECKPOINTS checkpoint lines have gone by, kills
# the whole pipeline when KILL_LINES records have followed the newest
# checkpoint line (as crash.sh does: records in flight past every
# checkpoint that can be complete).
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume "\$@" 2>>"$WORK/consume.err" |
  KILL_LOG="$WORK/killed" "$KPIPE_SOURCE_DIR/tests/integration/bin/kill_after_checkpoints" |
  kjoin -v -b "$BROKERS" --table "kafka:$U" --key .value.user_id --as .value.user --state "$S" 2>>"$WORK/join.err" |
  kcheckpoint commit --state "$S" --passthrough >>"$WORK/out.ndjson" 2>>"$WORK/commit.err"
PIPE

# Each run's lines of out.ndjson (first and last, 1-based) go to ranges:
# "RUN FIRST LAST", and after it the newest complete checkpoint's id to
# checkpoints: "RUN ID".
: >"$WORK/out.ndjson"
: >"$WORK/ranges"
: >"$WORK/checkpoints"
kills=0
for r in 0 1 2 3; do
  table_batch "$r"
  first=$(($(lines "$WORK/out.ndjson") + 1))
  before=$(completed) killed_before=$(lines "$WORK/killed")
  KILL_CHECKPOINTS=$((1 + RANDOM % 4)) KILL_LINES=$((1 + RANDOM % 2000)) \
    run_pipeline -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms
  wait_checkpoints $((before + 1))
  split -n l/5 -d "$WORK/chunk.0$r" "$WORK/chunk.0$r.piece."
  for piece in "$WORK/chunk.0$r".piece.*; do
    kproduce -b "$BROKERS" -t "$T" -k .user_id "$piece" || fail "kproduce failed"
  done
  # The round's records are all in the topic: the pipeline dies on its
  # own, or is given 5 s to, then killed.
  deadline=$((SECONDS + 5))
  while kill -0 "$PIPELINE" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.02 # polling the pipeline: a session's leader can be waited on only once
  done
  kill -KILL -- "-$PIPELINE" 2>/dev/null || true
  wait "$PIPELINE" 2>/dev/null || true
  wait_for "every process of run $r to end" 30 pipeline_gone
  torn=$(cut_torn_line "$WORK/out.ndjson")
  ((torn == 0)) || echo "the kill tore the last line written: $torn bytes cut"
  kills=$((kills + 1))
  echo "$r $first $(lines "$WORK/out.ndjson")" >>"$WORK/ranges"
  echo "$r $(completed)" >>"$WORK/checkpoints"
done
assert_eq "$kills" 4 "pipelines killed"

# The drain, after a last change to the table.
table_batch 4
first=$(($(lines "$WORK/out.ndjson") + 1))
run_pipeline -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms -e
wait "$PIPELINE" || fail "the last run failed: $(cat "$WORK"/*.err)"
PIPELINE=""
echo "4 $first $(lines "$WORK/out.ndjson")" >>"$WORK/ranges"
echo "4 $(completed)" >>"$WORK/checkpoints"
cat "$WORK"/*.err >"$WORK/diagnostics"
! grep -q 'error' "$WORK/diagnostics" || fail "errors: $(cat "$WORK/diagnostics")"

# --- the checks ----------------------------------------------------------------------

# Every record of the stream, as kconsume writes it, by position.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
cp "$WORK/out" "$WORK/stream.ndjson"
assert_eq "$(lines "$WORK/stream.ndjson")" 36000 "records in the stream"
jq -c -n '[inputs | {key: "\(.partition)/\(.offset)", value: .}] | from_entries' "$WORK/stream.ndjson" >"$WORK/by_position.json"

# Each run's lines: the record's envelope with .value.user its user's row
# in the table that run started with (null for none), byte for byte.
grep -v '^{"\$kpipe"' "$WORK/out.ndjson" >/dev/null || fail "the pipeline wrote nothing"
while read -r run from to; do
  ((from <= to)) || continue
  sed -n "${from},${to}p" "$WORK/out.ndjson" |
    jq -R -r --slurpfile t "$WORK/table.$run" --slurpfile p "$WORK/by_position.json" '
      . as $line | fromjson | select(has("$kpipe") | not)
      | ($p[0]["\(.partition)/\(.offset)"]) as $record
      | if $record == null then "run '"$run"': a line of no record: \($line)"
        else ($record | .value.user = ($t[0][.value.user_id] // null) | tojson) as $want
        | select($want != $line) | "run '"$run"': got      \($line)\n        expected \($want)"
        end' >"$WORK/wrong.$run"
  [[ ! -s "$WORK/wrong.$run" ]] || fail "run $run wrote lines with the wrong row ($(wc -l <"$WORK/wrong.$run") lines): $(head -4 "$WORK/wrong.$run")"
done <"$WORK/ranges"

# Nothing lost: every position comes out.
jq -r 'select(has("$kpipe") | not) | "\(.partition)/\(.offset)"' "$WORK/out.ndjson" | sort -u >"$WORK/got"
jq -r '"\(.partition)/\(.offset)"' "$WORK/stream.ndjson" | sort -u >"$WORK/want"
assert_files_equal "$WORK/got" "$WORK/want"

# The drain restored the table of the checkpoint it resumed from: as many
# rows as the table of the run that completed that checkpoint.
restore=$(grep "^kjoin: restored " "$WORK/join.err" | tail -1)
[[ $restore =~ ^kjoin:\ restored\ ([0-9]+)\ rows\ of\ \'kjoin\'\ from\ checkpoint\ ([0-9]+)\ in\ \'(.*)\'$ ]] ||
  fail "no restore line: $(cat "$WORK/join.err")"
rows=${BASH_REMATCH[1]} checkpoint=${BASH_REMATCH[2]}
saver=$(awk -v c="$checkpoint" '$2 >= c { print $1; exit }' "$WORK/checkpoints")
[[ -n "$saver" && "$saver" != 4 ]] || fail "checkpoint $checkpoint restored by the drain was not completed before it"
assert_eq "$rows" "$(jq length "$WORK/table.$saver")" "rows restored from checkpoint $checkpoint (run $saver's table)"
assert_eq "${BASH_REMATCH[3]}" "$S" "the store named in the restore line"

# The kills did land mid-stream, at least once from inside.
[[ -s "$WORK/killed" ]] || fail "no kill came with records in flight: every round ran out of records first"
expect_exit 0 kcheckpoint verify --state "$S"
echo "join crash: ok ($(wc -l <"$WORK/killed") of $kills kills from inside: $(paste -sd';' "$WORK/killed"))"
