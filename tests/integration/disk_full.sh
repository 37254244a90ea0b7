#!/usr/bin/env bash
# Stores on a full file system (kpipe(7), STORES): the state database, the
# dead-letter store and kupsert's table, on a small tmpfs that fills while
# the pipeline
#   kconsume --state S | kdedup --state S --dlq D | kupsert --db S --state S
# runs. The program that cannot write exits 1 with one line naming the file
# and the fault; no checkpoint is half written (kcheckpoint verify finds
# nothing wrong, and every record a complete checkpoint covers is in the
# table); once space is freed a restart resumes from the last complete
# checkpoint, and the table and the dead-letter store end as one clean
# pass would leave them: nothing lost, no dead letter twice. Then each
# store alone: kdedup --dlq, kupsert --db and kcheckpoint import on a file
# system that is full from the start. SQLite files only.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "the fault is the disk's, not the broker's"
private_mounts
start_broker ev:2
T=$(topic ev)
DISK=$WORK/disk
small_disk "$DISK" 8m
S=$DISK/state.db
D=$DISK/dlq.db

# produce FIRST COUNT: COUNT events from number FIRST on (distinct ids),
# and after every 100th one a record without an event id: bad input.
produce() {
  "$KPIPE_SOURCE_DIR/scripts/gen-events" -n "$2" -k 300 -s "$1" |
    jq -c --argjson first "$1" '.event_id = "e\($first)-\(input_line_number)"' |
    awk '{ print } NR % 100 == 0 { printf "{\"user_id\":\"u%d\",\"no_event_id\":%d}\n", NR, NR }' \
      >"$WORK/batch.ndjson"
  kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/batch.ndjson" || fail "cannot produce"
}

# The pipeline; each stage's standard error in $WORK/NAME.err, their exit
# statuses in $WORK/status once it ends. Arguments go to kconsume.
pipeline() {
  {
    set +e # the statuses are the result
    kconsume -b "$BROKERS" -t "$T" --state "$S" --checkpoint-interval 100ms "$@" 2>"$WORK/consume.err" |
      kdedup --key .value.event_id --state "$S" --dlq "$D" 2>"$WORK/dedup.err" |
      kupsert --db "$S" --table ev --key topic,partition,offset --state "$S" 2>"$WORK/upsert.err"
    echo "${PIPESTATUS[*]}" >"$WORK/status"
  } &
}

ended() { [[ -s "$WORK/status" ]]; }

produce 1 1000 # and 10 bad records
pipeline
wait_for "the first 1010 records' checkpoint" 30 eval '(($(consumed) == 1010))'

# The disk fills while the pipeline runs, and more records come.
fill_disk "$DISK"
produce 2 4000
wait_for "the pipeline to stop on the full disk" 30 ended
read -r -a status <"$WORK/status"
[[ "${status[*]}" != "0 0 0" ]] || fail "the pipeline went on with the disk full"
# Each stage that failed said why in one line, naming its file and the
# full disk; the others ended without an error (kdedup's summary of dead
# letters is a warning).
for stage in consume dedup upsert; do
  f=$WORK/$stage.err
  grep -q ': error: ' "$f" || continue
  assert_eq "$(grep -c ': error: ' "$f")" 1 "errors kconsume|kdedup|kupsert's $stage wrote: $(cat "$f")"
  grep -qE "^k[a-z]+: error: (state database '$S'|dead-letter store '$D'|database '$S'): cannot write: the file system is full \((database or disk is full|disk I/O error)\)$" "$f" ||
    fail "$stage's error is not one naming the file and the full disk: $(cat "$f")"
  grep -v ': error: ' "$f" | grep -v ': warning: ' && fail "$stage wrote more than its error: $(cat "$f")"
done
grep -q ': error: ' "$WORK"/{consume,dedup,upsert}.err || fail "the pipeline stopped without saying why"

# No checkpoint is half written: every record it covers is in the table.
expect_exit 0 kcheckpoint verify --state "$S"
before=$(consumed)
((before >= 1010)) || fail "the complete checkpoint went back: $before records"
covered=$(sql "$S" 'SELECT COUNT(*) FROM ev e JOIN offsets o ON e.topic = o.topic AND e.partition = o.partition
  AND e."offset" < o."offset"')
bad_covered=$(sql "$S" 'SELECT COALESCE(SUM("offset"), 0) FROM offsets')
assert_eq "$((bad_covered - covered))" "$(sql "$D" "SELECT COUNT(*) FROM dead_letters")" \
  "records a complete checkpoint covers that are neither in the table nor dead letters"

# Space freed, a restart drains the topic: as one clean pass.
rm "$DISK/filler"
rm "$WORK/status"
pipeline -e
wait_for "the restarted pipeline" 60 ended
assert_eq "$(cat "$WORK/status")" "0 0 0" "the restart's exit statuses ($(cat "$WORK"/*.err))"
assert_eq "$(consumed)" 5050 "records the stored offsets cover after the restart"
assert_eq "$(sql "$S" "SELECT COUNT(DISTINCT json_extract(value, '$.event_id')) FROM ev")" 5000 "events in the table"
assert_eq "$(sql "$S" "SELECT COUNT(*) FROM ev")" 5000 "rows in the table"
assert_eq "$(sql "$D" "SELECT COUNT(*) FROM dead_letters")" 50 "dead letters"
assert_eq "$(sql "$D" "SELECT COUNT(DISTINCT source_partition || '/' || source_offset) FROM dead_letters")" 50 \
  "dead letters from distinct records"
expect_exit 0 kcheckpoint verify --state "$S"

# Each store alone on a file system full from the start: one line naming
# the file, exit 1, nothing written; once space is freed, the same works.
full_alone() {
  local what=$1 want=$2
  shift 2
  expect_exit 1 "$@"
  grep -qxE "$want" "$WORK/err" && [[ $(wc -l <"$WORK/err") == 1 ]] ||
    fail "$what on a full disk: '$(cat "$WORK/err")' is not one line matching '$want'"
}
printf '%s\n' '{"topic":"t","partition":0,"offset":7}' >"$WORK/import.ndjson"
for i in 1 2 3; do printf 'not json %d\n' "$i"; done >"$WORK/bad.ndjson"
kconsume -b "$BROKERS" -t "$T" -c 200 | jq -c 'select(.value.event_id)' >"$WORK/rows.ndjson"
expect_exit 0 kcheckpoint import --state "$DISK/alone.db" <"$WORK/import.ndjson"
expect_exit 0 kdedup --key .value.event_id --dlq "$DISK/alone-dlq.db" </dev/null
expect_exit 0 kupsert --db "$DISK/alone-table.db" --table ev --key topic,partition,offset </dev/null
fill_disk "$DISK"
full="cannot write: the file system is full \((database or disk is full|disk I/O error)\)"
full_alone "kcheckpoint import" "kcheckpoint: error: state database '$DISK/alone.db': $full" \
  kcheckpoint import --state "$DISK/alone.db" "$WORK/import.ndjson"
full_alone "kdedup --dlq" "kdedup: error: dead-letter store '$DISK/alone-dlq.db': $full" \
  kdedup --key .value.event_id --dlq "$DISK/alone-dlq.db" "$WORK/bad.ndjson"
full_alone "kupsert" "kupsert: error: database '$DISK/alone-table.db': $full" \
  kupsert --db "$DISK/alone-table.db" --table ev --key topic,partition,offset "$WORK/rows.ndjson"
rm "$DISK/filler"
expect_exit 0 kcheckpoint import --state "$DISK/alone.db" "$WORK/import.ndjson"
assert_eq "$(sql "$DISK/alone.db" 'SELECT "offset" FROM offsets')" 7 "the imported offset"
expect_exit 0 kdedup --key .value.event_id --dlq "$DISK/alone-dlq.db" "$WORK/bad.ndjson"
assert_eq "$(sql "$DISK/alone-dlq.db" "SELECT COUNT(*) FROM dead_letters")" 3 "dead letters"
expect_exit 0 kupsert --db "$DISK/alone-table.db" --table ev --key topic,partition,offset "$WORK/rows.ndjson"
assert_eq "$(sql "$DISK/alone-table.db" "SELECT COUNT(*) FROM ev")" "$(wc -l <"$WORK/rows.ndjson")" "rows"
