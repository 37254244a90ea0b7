#!/usr/bin/env bash
# The terminal stages that save no snapshots keep the options that decide
# where the pipeline's records went, and refuse a run on the same state with
# others, as kdedup and kwindow refuse a saved state made with other options
# (kupsert(1), kproduce(1)): two runs of one pipeline on one store, one with
# --table clicks and one with --table clicks2, both exited 0 and split the
# windows between two tables. Runs on SQLite and on PostgreSQL
# (KPIPE_TEST_STORE).
source "$(dirname "$0")/lib.sh"

S=$(store state)
DB=$(store table)
checkpoint() { printf '{"$kpipe":"checkpoint","id":%s,"at":%s,"offsets":[]}\n' "$1" "$1"; }
{
  echo '{"id":1,"n":1}'
  checkpoint 1
} >"$WORK/one.ndjson"
{
  echo '{"id":2,"n":2}'
  checkpoint 2
} >"$WORK/two.ndjson"

# --- kupsert: --table, --key, --mode ----------------------------------------------
expect_exit 0 kupsert --db "$DB" --table clicks --key id --state "$S" "$WORK/one.ndjson"
expect_exit 1 kupsert --db "$DB" --table clicks2 --key id --state "$S" "$WORK/two.ndjson"
assert_eq "$(cat "$WORK/err")" "kupsert: error: the saved state of 'kupsert' was made with --table clicks, not --table clicks2: give another --name or state file" "another --table"
assert_eq "$(has_table "$DB" clicks2)" 0 "the refused run's table"
expect_exit 1 kupsert --db "$DB" --table clicks --key id,n --state "$S" "$WORK/two.ndjson"
assert_eq "$(cat "$WORK/err")" "kupsert: error: the saved state of 'kupsert' was made with --key id, not --key id,n: give another --name or state file" "another --key"
expect_exit 1 kupsert --db "$DB" --table clicks --key id --mode ignore --state "$S" "$WORK/two.ndjson"
assert_eq "$(cat "$WORK/err")" "kupsert: error: the saved state of 'kupsert' was made with --mode upsert, not --mode ignore: give another --name or state file" "another --mode"
assert_eq "$(sql "$S" "SELECT COALESCE(MAX(id), 0) FROM checkpoints WHERE completed_at IS NOT NULL")" 1 "no refused run completed a checkpoint"
# The same options (the default mode said or not) go on; another --name is
# another stage.
expect_exit 0 kupsert --db "$DB" --table clicks --key id --mode upsert --state "$S" "$WORK/two.ndjson"
assert_eq "$(sql "$DB" "SELECT id, n FROM clicks ORDER BY id" | tr '\n' ' ')" "1|1 2|2 " "the rows of both runs in one table"
expect_exit 0 kupsert --db "$DB" --table clicks2 --key id --state "$S" --name other "$WORK/two.ndjson"

# --- kproduce --transactional: --topic --------------------------------------------
start_broker out:1 out2:1 source:1
S2=$(store produce_state)
tx_input() {
  printf '{"n":%s}\n{"$kpipe":"checkpoint","id":%s,"at":5,"group":"%s","offsets":[{"topic":"%s","partition":0,"offset":%s}]}\n' \
    "$1" "$1" "$(group tx)" "$(topic source)" "$1"
}
tx_input 1 >"$WORK/tx1.ndjson"
tx_input 2 >"$WORK/tx2.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic out)" --transactional --state "$S2" "$WORK/tx1.ndjson"
expect_exit 1 kproduce -b "$BROKERS" -t "$(topic out2)" --transactional --state "$S2" "$WORK/tx2.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: the saved state of 'kproduce' was made with --topic $(topic out), not --topic $(topic out2): give another --state" "another --topic"
assert_eq "$(kconsume -b "$BROKERS" -t "$(topic out2)" -e --format value | wc -l)" 0 "nothing produced by the refused run"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic out)" --transactional --state "$S2" "$WORK/tx2.ndjson"
assert_eq "$(kconsume -b "$BROKERS" -t "$(topic out)" -e --format value | jq -c -s 'map(.n)')" "[1,2]" "both runs' records in one topic"

echo "terminal_stage_options: ok"
