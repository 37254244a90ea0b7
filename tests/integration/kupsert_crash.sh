#!/usr/bin/env bash
# Exactly once into SQLite: the pipeline
#   kconsume --state S | MIDDLE | kupsert --db S --state S
# is killed with SIGKILL, whole, at random moments (five times: after a
# random number of lines has gone through it) and restarted; after each
# kill the table holds exactly the records of the last complete
# checkpoint, and at the end it equals the table of a clean one-shot run.
#
# MIDDLE stands where kwindow goes, and is `cat` for now: kwindow is built
# on another branch. To run the test through it, change the one line below
# that defines middle() and KEY to
#   middle() { kwindow --state "$S" --time .value.ts --key .value.user_id --tumble 1s ${FINAL:+--flush-at-end}; }; KEY=window_start,key
# (the per-kill check that rows == records before the checkpoint applies
# to the envelope form only; the final comparison to a clean run to both).
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }

middle() { cat; }; KEY=topic,partition,offset

# The kill: a shell loop ahead of the middle stage forwards every line,
# control lines included, and once KILL_CHECKPOINTS checkpoint lines and
# then KILL_LINES more lines have gone through, kills its own process
# group, which is the whole pipeline. The kills land anywhere in a
# checkpoint's interval, early or late, and in any process. Being slow, the
# loop also keeps the stream flowing while the kills go on. The last and the
# clean runs go without it, at full speed.
killer() {
  local checkpoints=0 lines=0
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if ((checkpoints < KILL_CHECKPOINTS)); then
      [[ $line != '{"$kpipe":"checkpoint"'* ]] || checkpoints=$((checkpoints + 1))
    elif ((++lines >= KILL_LINES)); then
      kill -KILL 0
    fi
  done
}

N=30000
start_broker events:4
T=$(topic events)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 500 -r 0.03 -s 7 >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson"

# pipeline STATE [kconsume options]: the pipeline on state file STATE,
# killed by killer() unless FINAL is set.
pipeline() {
  S=$1
  shift
  if [[ -n "${FINAL:-}" ]]; then
    kconsume -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms "$@" |
      middle |
      kupsert --db "$S" --table w --key "$KEY" --state "$S"
  else
    kconsume -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms "$@" |
      killer |
      middle |
      kupsert --db "$S" --table w --key "$KEY" --state "$S"
  fi
}

# Records covered by the newest complete checkpoint.
progress() {
  sqlite3 -readonly "$1" 'SELECT COALESCE(SUM("offset"), 0) FROM offsets' 2>/dev/null || echo 0
}

# The exactly-once invariant: per partition, the rows are the records
# before the stored offset, no more, no fewer.
check_exact() {
  local bad
  if [[ $(sqlite3 -readonly "$1" "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'w'") == 0 ]]; then
    # Killed before the first checkpoint: no rows, and nothing complete.
    assert_eq "$(progress "$1")" 0 "records complete without a table"
    return
  fi
  bad=$(sqlite3 -readonly "$1" '
    SELECT (SELECT COUNT(*) FROM offsets o
            WHERE o."offset" != (SELECT COUNT(*) FROM w WHERE w.topic = o.topic AND w.partition = o.partition))
         + (SELECT COUNT(*) FROM w WHERE NOT EXISTS (
              SELECT 1 FROM offsets o WHERE o.topic = w.topic AND o.partition = w.partition AND w."offset" < o."offset"))' 2>&1)
  [[ "$bad" == 0 ]] || fail "after a kill the table does not match the checkpoint: $bad"
}

# Each pipeline runs in a session of its own, so that one kill takes all of
# its processes at once, as a crash of the machine would.
export -f pipeline middle killer
export BROKERS T KEY
job=""
trap 'status=$?; set +e; [[ -z "$job" ]] || kill -KILL -- -"$job" 2>/dev/null; (exit $status); cleanup' EXIT
CRASH=$WORK/crash.db
: >"$WORK/kills"
for kill in 1 2 3 4 5; do
  # Within the first or the second checkpoint's interval (the first kill
  # after one checkpoint, so that a restart resumes from one).
  checkpoints=$(shuf -i 0-1 -n 1) lines=$(shuf -i 1-4000 -n 1)
  ((kill > 1)) || checkpoints=1
  KILL_CHECKPOINTS=$checkpoints KILL_LINES=$lines setsid bash -c 'pipeline "$0"' "$CRASH" 2>>"$WORK/pipeline.err" &
  job=$!
  status=0
  wait "$job" || status=$?
  [[ $status == 137 ]] || fail "kill $kill: the pipeline exited $status, not by its kill: $(cat "$WORK/pipeline.err")"
  # Every process of the pipeline is dead before the next one starts
  # (zombies aside: they hold nothing, and this machine's init reaps
  # orphans slowly).
  while [[ -n "$(ps -o stat= -s "$job" | grep -v '^Z')" ]]; do :; done
  job=""
  echo "kill $kill, $lines lines after $checkpoints checkpoints: $(progress "$CRASH") records complete" >>"$WORK/kills"
  [[ $KEY != topic,partition,offset ]] || check_exact "$CRASH"
done
# The kills landed in the middle of the stream: after some checkpoints, and
# before the end.
done_records=$(progress "$CRASH")
((done_records > 0 && done_records < N)) || fail "the kills did not land mid-stream: $(cat "$WORK/kills")"

# The last run goes to the end.
export FINAL=1
pipeline "$CRASH" -e 2>>"$WORK/pipeline.err" || fail "the last run failed: $(cat "$WORK/pipeline.err")"
[[ $KEY != topic,partition,offset ]] || check_exact "$CRASH"
pipeline "$WORK/clean.db" -e 2>"$WORK/clean.err" || fail "the clean run failed: $(cat "$WORK/clean.err")"

dump() { sqlite3 -readonly "$1" "SELECT * FROM w ORDER BY ${KEY//,/, }"; }
dump "$CRASH" >"$WORK/crash.rows"
dump "$WORK/clean.db" >"$WORK/clean.rows"
[[ $KEY != topic,partition,offset ]] || assert_eq "$(wc -l <"$WORK/clean.rows")" "$N" "rows of the clean run"
assert_files_equal "$WORK/crash.rows" "$WORK/clean.rows"
# Nothing went wrong quietly: no stage complained.
grep -v 'rows after the last checkpoint' "$WORK/pipeline.err" >"$WORK/complaints" || true
assert_empty "$WORK/complaints"
