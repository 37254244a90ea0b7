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

# --- numbers: the same rows in either order make the same table ------------------
# kpipe writes an integral double as an integer (kwindow's sums and
# averages), so a column's first number does not tell its type. PostgreSQL
# widens a bigint column, once, saying so; SQLite keeps each value as it is.
# Each order in one batch, and row by row in batches of one.
columns() {
  if $pg; then
    q "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
      FROM information_schema.columns WHERE table_name = '$1'"
  else
    q "SELECT group_concat(name, ', ') FROM pragma_table_info('$1')"
  fi
}
big=123456789012345678901234567890
for batch in 1 50000; do
  printf '%s\n' '{"id":1,"price":250000,"n":1}' '{"id":2,"price":12.25,"n":'$big'}' >"$WORK/up.ndjson"
  printf '%s\n' '{"id":2,"price":12.25,"n":'$big'}' '{"id":1,"price":250000,"n":1}' >"$WORK/down.ndjson"
  for order in up down; do
    table=${order}_$batch
    expect_exit 0 kupsert --db "$DB" --table "$table" --key id --batch "$batch" "$WORK/$order.ndjson"
    got=$(q "SELECT id, price, CAST(n AS text) FROM $table ORDER BY id" | tr '\n' ' ')
    if $pg; then
      assert_eq "$got" "1|250000|1 2|12.25|$big " "$table: rows"
      assert_eq "$(columns "$table")" "id bigint, price double precision, n numeric" "$table: columns"
      if [[ $batch == 1 && $order == up ]]; then
        assert_eq "$(cat "$WORK/err")" "kupsert: warning: column 'price' of table '$table' is now double precision, not bigint, for a number with a fraction or exponent (kupsert(1), PostgreSQL)
kupsert: warning: column 'n' of table '$table' is now numeric, not bigint, for an integer beyond 64 bits (kupsert(1), PostgreSQL)" "$table: stderr"
      else
        assert_eq "$(cat "$WORK/err")" "" "$table: stderr"
      fi
    else
      # As SQLite reads an integer beyond 64 bits: a REAL.
      assert_eq "$got" "1|250000|1 2|12.25|1.23456789012346e+29 " "$table: rows"
      assert_eq "$(cat "$WORK/err")" "" "$table: stderr"
    fi
  done
done
# A table's own bigint column widens too, once; a fraction then fits.
if $pg; then
  q "CREATE TABLE amounts (id bigint PRIMARY KEY, amount bigint)"
  printf '%s\n' '{"id":1,"amount":3}' '{"id":2,"amount":3.5}' '{"id":3,"amount":4.75}' |
    expect_exit 0 kupsert --db "$DB" --table amounts --key id --batch 1
  assert_eq "$(grep -c 'is now double precision' "$WORK/err")" 1 "one warning"
  assert_eq "$(q "SELECT sum(amount) FROM amounts")" "11.25" "amounts"
fi

# --- a dot in --table separates a schema from the table, as in SQL and kjoin -------
printf '%s\n' '{"id":1,"v":"a"}' >"$WORK/one.ndjson"
if $pg; then
  q "CREATE SCHEMA sales"
  expect_exit 0 kupsert --db "$DB" --table sales.accounts --key id "$WORK/one.ndjson"
  assert_eq "$(q "SELECT table_schema || '.' || table_name FROM information_schema.tables
    WHERE table_name LIKE '%accounts%'")" "sales.accounts" "the table, in its schema"
  assert_eq "$(q "SELECT id, v FROM sales.accounts")" "1|a" "its row"
  # Again, and widened: the same table, found in its schema.
  printf '%s\n' '{"id":2,"v":"b","n":2.5}' | expect_exit 0 kupsert --db "$DB" --table sales.accounts --key id
  assert_eq "$(q "SELECT count(*), sum(n) FROM sales.accounts")" "2|2.5" "written again"
  # kjoin reads it by the same name.
  printf '%s\n' '{"id":1}' | expect_exit 0 kjoin --table "$DB#sales.accounts" --table-key id --key .id --as .account
  assert_eq "$(cat "$WORK/out")" '{"id":1,"account":{"id":1,"v":"a","n":null}}' "kjoin"
  expect_exit 2 kupsert --db "$DB" --table nosuch.t --key id <<<'{"id":1}'
  assert_eq "$(cat "$WORK/err")" "kupsert: error: --table 'nosuch.t': '$DB' has no schema 'nosuch' (CREATE SCHEMA makes one)" "no schema"
else
  expect_exit 0 kupsert --db "$DB" --table main.accounts --key id "$WORK/one.ndjson"
  assert_eq "$(q "SELECT name FROM sqlite_schema WHERE name LIKE '%accounts%'")" "accounts" "main.accounts is accounts"
  expect_exit 2 kupsert --db "$DB" --table sales.accounts --key id <<<'{"id":1}'
  assert_eq "$(cat "$WORK/err")" "kupsert: error: --table 'sales.accounts': an SQLite file has no schema 'sales', only main" "no schema"
fi
expect_exit 2 kupsert --db "$DB" --table a.b.c --key id <<<'{"id":1}'
assert_eq "$(cat "$WORK/err")" "kupsert: error: --table 'a.b.c': a table is NAME or SCHEMA.NAME, one dot between a schema and the table" "two dots"
expect_exit 2 kupsert --db "$DB" --table sales. --key id <<<'{"id":1}'
assert_eq "$(cat "$WORK/err")" "kupsert: error: --table 'sales.': the table: the name is empty" "no table after the dot"

echo "kupsert_stores: ok"
