#!/usr/bin/env bash
# The server cuts the pipeline off (kpipe(7), STORES): the exactly-once
# pipeline
#   kconsume --state PG | kdedup --state PG | kwindow --state PG | kupsert --db PG --state PG
# loses every connection to its database three times mid-stream (the server
# ends their sessions, as a failover or a restart would). Each time a stage
# stops with exit 1, saying it lost the connection, and the pipeline ends;
# restarted, it resumes from the last complete checkpoint. At the end the
# table is the table of one clean run, and kcheckpoint verify finds nothing.
source "$(dirname "$0")/lib.sh"
if [[ "$KPIPE_TEST_STORE" != postgres ]]; then
  echo "skipped: needs KPIPE_TEST_STORE=postgres (ctest: integration/postgres: postgres_lost)"
  exit 77
fi

N=30000
start_broker events:4
T=$(topic events)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$N" -k 300 -r 0.03 -s 11 >"$WORK/events.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson"

# pipeline STORE [kconsume options]; SLOW=1 puts a shell loop after
# kconsume, slow enough that a cut lands mid-stream.
slow() { if ((${SLOW:-0})); then while IFS= read -r line; do printf '%s\n' "$line"; done; else cat; fi; }
pipeline() {
  local s=$1
  shift
  kconsume -b "$BROKERS" -t "$T" --state "$s" --checkpoint-interval 100ms "$@" |
    slow |
    kdedup --key .value.event_id --state "$s" |
    kwindow --state "$s" --time .value.ts --key .value.user_id --tumble 1m --watermark 5s \
      --agg count --agg sum:.value.amount --time-format ms --flush-at-end |
    kupsert --db "$s" --table w --key window_start,key --state "$s"
}
completed() { sql "$1" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL" 2>/dev/null || echo 0; }

S=$(store lost)
for cut in 1 2 3; do
  before=$(completed "$S")
  # Reading without -e: the pipeline runs until its connections are cut.
  SLOW=1 pipeline "$S" 2>"$WORK/cut$cut.err" &
  job=$!
  # A checkpoint more than before: the pipeline is mid-stream, with work
  # done since its last restart.
  wait_for "a checkpoint in run $cut" 60 bash -c "(( \$(psql -XAtq '$S' -c \"SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL\") > $before ))"
  sql "$S" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()" >/dev/null
  status=0
  wait "$job" || status=$?
  # The pipeline's status is kupsert's; some stage must have failed, and
  # said why.
  grep -q "lost the connection" "$WORK/cut$cut.err" ||
    fail "run $cut: no stage said it lost its connection (status $status): $(cat "$WORK/cut$cut.err")"
  grep -q "error" "$WORK/cut$cut.err" || fail "run $cut: no error: $(cat "$WORK/cut$cut.err")"
  done_records=$(consumed "$S")
  echo "cut $cut: after $done_records of $N records" >>"$WORK/cuts"
done
# The cuts landed mid-stream: records were left for the runs after them.
(($(head -1 "$WORK/cuts" | cut -d' ' -f4) < N)) || fail "the first cut came after the end: $(cat "$WORK/cuts")"
# The last run reads to the end.
pipeline "$S" -e 2>"$WORK/last.err" || fail "the last run failed: $(cat "$WORK/last.err")"

C=$(store clean)
pipeline "$C" -e 2>"$WORK/clean.err" || fail "the clean run failed: $(cat "$WORK/clean.err")"
q='SELECT window_start, window_end, key, count, sum_amount FROM w ORDER BY window_start, key'
sql "$S" "$q" >"$WORK/got"
sql "$C" "$q" >"$WORK/want"
[[ $(wc -l <"$WORK/want") -gt 100 ]] || fail "the clean run made only $(wc -l <"$WORK/want") windows"
assert_files_equal "$WORK/want" "$WORK/got"
expect_exit 0 kcheckpoint verify --state "$S"
echo "postgres_lost: ok ($(tr "\n" ";" <"$WORK/cuts"))"
