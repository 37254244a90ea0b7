#!/usr/bin/env bash
# Exactly once into SQLite, and into PostgreSQL (lib.sh, store): the pipeline
#   kconsume --state S | kwindow --state S ... | kupsert --db S --table w --key window_start,key --state S
# is killed with SIGKILL, whole, at random moments (five times: after a
# random number of lines has gone through it) and restarted; at the end the
# table equals the one a clean one-shot run makes. The same again without
# kwindow, kupsert writing the envelopes themselves keyed by topic,
# partition and offset: there the table can be checked after each kill, and
# must hold exactly the records before the last complete checkpoint.
source "$(dirname "$0")/lib.sh"
[[ $KPIPE_TEST_STORE == postgres ]] || command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }

# The kill: a shell loop ahead of the middle stage forwards every line,
# control lines included, and once KILL_CHECKPOINTS checkpoint lines and
# then KILL_LINES more lines have gone through, kills its own process
# group, which is the whole pipeline. The kills land anywhere in a
# checkpoint's interval, early or late, and in any process. Being slow, the
# loop also keeps the stream flowing while the kills go on. The last and the
# clean runs go without it, at full speed. With KILL_AFTER_COMPLETE=1 (the
# first kill), the loop holds the stream after the last of those checkpoint
# lines until the store ($S) has a complete checkpoint, so that the restart
# resumes from one: kupsert may take longer to commit a checkpoint than the
# loop takes to pass KILL_LINES lines (on PostgreSQL it often does: the
# first checkpoint also creates the table, over a connection).
killer() {
  local checkpoints=0 lines=0 deadline
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if ((checkpoints < KILL_CHECKPOINTS)); then
      [[ $line != '{"$kpipe":"checkpoint"'* ]] || checkpoints=$((checkpoints + 1))
      if ((checkpoints == KILL_CHECKPOINTS)) && ((${KILL_AFTER_COMPLETE:-0})); then
        # Polling the store: nothing else says when kupsert has committed.
        # Past the deadline the kill goes ahead, and the test fails below.
        deadline=$((SECONDS + 60))
        while (($(progress "$S") == 0 && SECONDS < deadline)); do sleep 0.01; done
      fi
    elif ((++lines >= KILL_LINES)); then
      kill -KILL 0
    fi
  done
}

# Enough records that five kills never run out of them: each killed run
# takes up to about 9,000 (the lines the killer counts, and what kconsume
# read ahead into its 1 MiB pipe before the first checkpoint line), and a
# run that ran out would wait on idle checkpoint lines, ten a second. 80k
# events of about 170 bytes stay under kbroker's 5 MiB per partition.
N=80000
start_broker events:4
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 500 -s 7 >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic events)" -k .user_id "$WORK/events.ndjson"

# The topic, the stage between kconsume and kupsert, the table's key, and
# the columns compared at the end, for each form. (kwindow's "emit" is left
# out of the comparison: after a restart a window may fire late where a
# clean run fired it on time, with the same aggregates.)
# Both read the four partitions: kconsume --state names them (partition
# events), so kwindow's watermark waits for every one of them, after a
# restart too.
form_setup() {
  case $1 in
    kwindow)
      middle() {
        kwindow --state "$S" --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
          --agg sum:.value.amount --time-format ms ${FINAL:+--flush-at-end}
      }
      T=$(topic events) KEY=window_start,key COMPARED=window_start,window_end,key,count,sum_amount ;;
    envelopes)
      middle() { cat; }
      T=$(topic events) KEY=topic,partition,offset COMPARED='*' ;;
  esac
}

# pipeline STATE [kconsume options]: the pipeline on the store STATE,
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

# Records covered by the newest complete checkpoint, read on a read-only
# connection.
progress() { consumed --readonly "$1"; }

# The exactly-once invariant of the envelope form: per partition, the rows
# are the records before the stored offset, no more, no fewer.
check_exact() {
  local bad
  if [[ $(has_table "$1" w) == 0 ]]; then
    # Killed before the first checkpoint: no rows, and nothing complete.
    assert_eq "$(progress "$1")" 0 "records complete without a table"
    return
  fi
  bad=$(sql --readonly "$1" '
    SELECT (SELECT COUNT(*) FROM offsets o
            WHERE o."offset" != (SELECT COUNT(*) FROM w WHERE w.topic = o.topic AND w.partition = o.partition))
         + (SELECT COUNT(*) FROM w WHERE NOT EXISTS (
              SELECT 1 FROM offsets o WHERE o.topic = w.topic AND o.partition = w.partition AND w."offset" < o."offset"))' 2>&1)
  [[ "$bad" == 0 ]] || fail "after a kill the table does not match the checkpoint: $bad"
}

# Each pipeline runs in a session of its own, so that one kill takes all of
# its processes at once, as a crash of the machine would.
export -f pipeline killer progress consumed sql is_postgres pg_conninfo
export BROKERS
job=""
trap 'status=$?; set +e; [[ -z "$job" ]] || kill -KILL -- -"$job" 2>/dev/null; (exit $status); cleanup' EXIT

crash_test() {
  local form=$1 crash clean kill checkpoints lines status done_records
  crash=$(store "$form") clean=$(store "$form-clean")
  form_setup "$form"
  export -f middle
  export KEY T
  : >"$WORK/$form.kills"
  for kill in 1 2 3 4 5; do
    # Within the first or the second checkpoint's interval (the first kill
    # after one complete checkpoint, so that a restart resumes from one).
    checkpoints=$(shuf -i 0-1 -n 1) lines=$(shuf -i 1-4000 -n 1)
    ((kill > 1)) || checkpoints=1
    KILL_CHECKPOINTS=$checkpoints KILL_LINES=$lines KILL_AFTER_COMPLETE=$((kill == 1)) \
      setsid bash -c 'pipeline "$0"' "$crash" 2>>"$WORK/$form.err" &
    job=$!
    status=0
    wait "$job" || status=$?
    [[ $status == 137 ]] || fail "$form, kill $kill: the pipeline exited $status, not by its kill: $(cat "$WORK/$form.err")"
    # Every process of the pipeline is dead before the next one starts
    # (zombies aside: they hold nothing, and this machine's init reaps
    # orphans slowly).
    while [[ -n "$(ps -o stat= -s "$job" | grep -v '^Z')" ]]; do :; done
    job=""
    echo "kill $kill, $lines lines after $checkpoints checkpoints: $(progress "$crash") records complete" \
      >>"$WORK/$form.kills"
    [[ $form != envelopes ]] || check_exact "$crash"
  done
  # The kills landed in the middle of the stream: after some checkpoints,
  # and before the end.
  done_records=$(progress "$crash")
  ((done_records > 0 && done_records < N)) || fail "$form: the kills did not land mid-stream: $(cat "$WORK/$form.kills")"

  # The last run goes to the end; then a clean one-shot run.
  FINAL=1 pipeline "$crash" -e 2>>"$WORK/$form.err" || fail "$form: the last run failed: $(cat "$WORK/$form.err")"
  [[ $form != envelopes ]] || check_exact "$crash"
  FINAL=1 pipeline "$clean" -e 2>>"$WORK/$form.err" || fail "$form: the clean run failed: $(cat "$WORK/$form.err")"

  # Column names quoted: "offset" is a reserved word in PostgreSQL.
  local columns=$COMPARED
  [[ $columns == '*' ]] || columns="\"${COMPARED//,/\", \"}\""
  local query="SELECT $columns FROM w ORDER BY \"${KEY//,/\", \"}\""
  sql --readonly "$crash" "$query" >"$WORK/$form.crash.rows"
  sql --readonly "$clean" "$query" >"$WORK/$form.clean.rows"
  local rows
  rows=$(wc -l <"$WORK/$form.clean.rows")
  case $form in
    envelopes) assert_eq "$rows" "$N" "rows of the clean run" ;;
    kwindow) ((rows >= 1000)) || fail "the clean run made only $rows windows" ;;
  esac
  assert_files_equal "$WORK/$form.crash.rows" "$WORK/$form.clean.rows"
  # Nothing went wrong quietly: no stage complained (kupsert's note on the
  # rows it left for the replay aside).
  grep -v 'rows after the last checkpoint' "$WORK/$form.err" >"$WORK/$form.complaints" || true
  assert_empty "$WORK/$form.complaints"
}

crash_test kwindow
crash_test envelopes
