#!/usr/bin/env bash
# kupsert's promises that hold alike on SQLite and on PostgreSQL (kupsert(1)),
# the same input given to either: this script runs once with its table in
# an SQLite file and once in a PostgreSQL database (KPIPE_TEST_STORE).
source "$(dirname "$0")/lib.sh"

DB=$(store table)
q() { sql "$DB" "$1"; }
pg=false
! is_postgres "$DB" || pg=true

# --- a row the table refuses: under fail, the rows before it are written ----------
# A table of the user's own whose column a takes integers only (PostgreSQL's
# bigint; a STRICT table's INTEGER in SQLite), so that both refuse "bad".
refusing_table() {
  if $pg; then
    q "CREATE TABLE $1 (k bigint PRIMARY KEY, a bigint)"
  else
    q "CREATE TABLE $1 (k INTEGER PRIMARY KEY, a INTEGER) STRICT"
  fi
}
refusing_table ex
printf '%s\n' '{"k":1,"a":5}' '{"k":2,"a":6}' '{"k":3,"a":"bad"}' '{"k":4,"a":7}' >"$WORK/refused.ndjson"
expect_exit 65 kupsert --db "$DB" --table ex --key k "$WORK/refused.ndjson"
assert_contains "$WORK/err" "kupsert: error: $WORK/refused.ndjson: line 3: the table refused the row: "
assert_eq "$(q "SELECT k, a FROM ex ORDER BY k" | tr '\n' ' ')" "1|5 2|6 " "fail: the rows before the refused one"
# Under skip the rest of the batch lands too.
refusing_table ex_skip
expect_exit 0 kupsert --db "$DB" --table ex_skip --key k --on-error skip "$WORK/refused.ndjson"
assert_eq "$(q "SELECT k, a FROM ex_skip ORDER BY k" | tr '\n' ' ')" "1|5 2|6 4|7 " "skip: the others"
# A batch long enough for PostgreSQL's COPY: the same.
{
  for i in $(seq 1 12); do echo "{\"k\":$i,\"a\":$i}"; done
  echo '{"k":13,"a":"bad"}'
  for i in $(seq 14 20); do echo "{\"k\":$i,\"a\":$i}"; done
} >"$WORK/long.ndjson"
refusing_table ex_long
expect_exit 65 kupsert --db "$DB" --table ex_long --key k "$WORK/long.ndjson"
assert_contains "$WORK/err" "$WORK/long.ndjson: line 13: the table refused the row: "
assert_eq "$(q "SELECT count(*), min(k), max(k) FROM ex_long")" "12|1|12" "fail: the rows before, out of a long batch"

echo "kupsert_stores: ok"
