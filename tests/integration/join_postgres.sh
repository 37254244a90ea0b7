#!/usr/bin/env bash
# kjoin with its table in a real PostgreSQL (kjoin(1), Tables:
# postgresql://...#TABLE): rows as JSON objects of their columns, keys of
# one column and of two, a table in a schema, every column type, --refresh
# bringing an UPDATE and a DELETE to later records while kjoin runs, a
# table that is not there (exit 2, the password never shown), a null key
# and duplicate keys. Runs only with its stores in
# PostgreSQL.
source "$(dirname "$0")/lib.sh"
if [[ "$KPIPE_TEST_STORE" != postgres ]]; then
  echo "skipped: needs KPIPE_TEST_STORE=postgres (ctest: integration/postgres: join_postgres)"
  exit 77
fi

DB=$(store crm)
sql "$DB" "CREATE TABLE customers (id bigint PRIMARY KEY, name text, tier text, score double precision,
    photo bytea, region text);
  INSERT INTO customers VALUES (7, 'Ada', 'gold', 1.5, '\\x00ff', 'eu'), (9, 'Grace', NULL, NULL, NULL, 'us'),
    (11, 'Edsger \"E\" W.', 'free', -2, NULL, 'eu');
  CREATE SCHEMA sales;
  CREATE TABLE sales.accounts (region text, id bigint, owner text, PRIMARY KEY (region, id));
  INSERT INTO sales.accounts VALUES ('eu', 7, 'Olga'), ('us', 7, 'Sam'), ('us', 9, 'Kim');"

# --- rows, keys ----------------------------------------------------------------
printf '%s\n' '{"customer_id":7,"n":1}' '{"customer_id":"9","n":2}' '{"customer_id":11,"n":3}' \
  '{"customer_id":12,"n":4}' '{"customer_id":null,"n":5}' >"$WORK/orders.ndjson"
expect_exit 0 kjoin --table "$DB#customers" --table-key id --key .customer_id --as .customer -v \
  "$WORK/orders.ndjson"
assert_eq "$(cat "$WORK/out")" '{"customer_id":7,"n":1,"customer":{"id":7,"name":"Ada","tier":"gold","score":1.5,"photo":"AP8=","region":"eu"}}
{"customer_id":"9","n":2,"customer":{"id":9,"name":"Grace","tier":null,"score":null,"photo":null,"region":"us"}}
{"customer_id":11,"n":3,"customer":{"id":11,"name":"Edsger \"E\" W.","tier":"free","score":-2,"photo":null,"region":"eu"}}
{"customer_id":12,"n":4,"customer":null}
{"customer_id":null,"n":5,"customer":null}' "joined rows"
assert_eq "$(cat "$WORK/err")" "kjoin: 5 records in, 3 joined, 2 missed, 0 dropped; table 3 rows" "summary"

# --- column types (kjoin(1), Tables: column type -> JSON value) -------------------
# numeric and the integer types come digit for digit: read through a double,
# two 20-digit keys were one row and matched no record, and 1e20 was the key
# "1e+20", which no record has.
sql "$DB" "CREATE TABLE kinds (k numeric(30,0), i2 smallint, i4 integer, i8 bigint, n numeric, f4 real,
    f8 double precision, b boolean, t varchar(8), j jsonb, ts timestamptz, by bytea, arr int[]);
  INSERT INTO kinds VALUES
    (10000000000000000001, -2, 40000, 9007199254740993, -1.50, 1.1, 0.1, true, 'x', '{\"a\":1}',
     '2024-01-02T03:04:05Z', '\\x00ff', '{1,2}'),
    (10000000000000000002, NULL, NULL, -9223372036854775808, 'NaN', 'Infinity', '-Infinity', false,
     NULL, NULL, NULL, NULL, NULL),
    (100000000000000000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
printf '%s\n' '{"u":10000000000000000001}' '{"u":"10000000000000000002"}' '{"u":100000000000000000000}' >"$WORK/kinds.ndjson"
PGTZ=UTC expect_exit 0 kjoin --table "$DB#kinds" --table-key k --key .u --as .r -v "$WORK/kinds.ndjson"
assert_eq "$(cat "$WORK/out")" '{"u":10000000000000000001,"r":{"k":10000000000000000001,"i2":-2,"i4":40000,"i8":9007199254740993,"n":-1.50,"f4":1.1,"f8":0.1,"b":true,"t":"x","j":"{\"a\": 1}","ts":"2024-01-02 03:04:05+00","by":"AP8=","arr":"{1,2}"}}
{"u":"10000000000000000002","r":{"k":10000000000000000002,"i2":null,"i4":null,"i8":-9223372036854775808,"n":null,"f4":null,"f8":null,"b":false,"t":null,"j":null,"ts":null,"by":null,"arr":null}}
{"u":100000000000000000000,"r":{"k":100000000000000000000,"i2":null,"i4":null,"i8":null,"n":null,"f4":null,"f8":null,"b":null,"t":null,"j":null,"ts":null,"by":null,"arr":null}}' "every column type as kjoin(1) tells"
assert_eq "$(cat "$WORK/err")" "kjoin: 3 records in, 3 joined, 0 missed, 0 dropped; table 3 rows" "summary of the types"
# A boolean key is the stream's true or false (the third row's is null).
printf '%s\n' '{"flag":true}' '{"flag":false}' | expect_exit 0 kjoin --table "$DB#kinds" --table-key b \
  --key .flag --as .r --on-error skip
assert_eq "$(jq -c '[.flag, .r.i2]' "$WORK/out" | paste -sd' ')" '[true,-2] [false,null]' "boolean keys"

# Two key columns, in a schema: the key is the array of both values.
printf '%s\n' '{"r":"us","c":7}' '{"r":"eu","c":7}' '{"r":"eu","c":9}' |
  expect_exit 0 kjoin --table "$DB#sales.accounts" --table-key region --table-key id \
    --key .r --key .c --as .account
assert_eq "$(jq -c '[.r, .c, .account.owner]' "$WORK/out" | paste -sd' ')" \
  '["us",7,"Sam"] ["eu",7,"Olga"] ["eu",9,null]' "composite keys"

# The conninfo form of a target (kpipe(7), STORES).
if [[ $DB =~ ^postgresql://([^@]+)@([^:/]+):([0-9]+)/(.+)$ ]]; then
  CONNINFO="postgresql:user=${BASH_REMATCH[1]} host=${BASH_REMATCH[2]} port=${BASH_REMATCH[3]} dbname=${BASH_REMATCH[4]}"
else
  fail "cannot take apart $DB"
fi
echo '{"c":9}' | expect_exit 0 kjoin --table "$CONNINFO#customers" --table-key id --key .c --as .who
assert_eq "$(jq -r .who.name "$WORK/out")" "Grace" "a conninfo target"

# --- --refresh: a change reaches the records read after it ------------------------
# kjoin reads a FIFO; the test writes one record at a time and waits for
# its line, until the UPDATE made after the first record shows.
mkfifo "$WORK/in"
kjoin --table "$DB#customers" --table-key id --key .customer_id --as .customer --refresh 100ms \
  <"$WORK/in" >"$WORK/live.out" 2>"$WORK/live.err" &
JOIN=$!
exec 3>"$WORK/in"
echo '{"customer_id":9}' >&3
wait_for "the first record" 30 grep -q Grace "$WORK/live.out"
sql "$DB" "UPDATE customers SET name = 'Grace H.' WHERE id = 9; DELETE FROM customers WHERE id = 7"
sent=1
written() { (($(lines "$WORK/live.out") >= sent)); }
updated() {
  echo '{"customer_id":9}' >&3
  sent=$((sent + 1))
  wait_for "record $sent" 30 written
  grep -q 'Grace H\.' "$WORK/live.out"
}
wait_for "the UPDATE to reach kjoin" 30 updated
echo '{"customer_id":7}' >&3
exec 3>&-
wait "$JOIN" || fail "kjoin --refresh exited $?: $(cat "$WORK/live.err")"
assert_eq "$(tail -1 "$WORK/live.out")" '{"customer_id":7,"customer":null}' "a deleted row after a refresh"
# Each record got the old row or the new one, whole.
assert_eq "$(jq -r .customer.name "$WORK/live.out" | sort -u | paste -sd,)" "Grace,Grace H.,null" "names seen"

# --- errors --------------------------------------------------------------------
SECRET_DB=$(sed 's#://kpipe@#://kpipe:hunter2@#' <<<"$DB")
# A table that is not there is a usage error, as a column that is not there
# is, listing what is there (it was exit 1 with PostgreSQL's words).
expect_exit 2 kjoin -q --table "$SECRET_DB#nosuch" --table-key id --key .customer_id --as .c "$WORK/orders.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kjoin: error: --table: $DB has no table 'nosuch' (it has customers, kinds, sales.accounts)" \
  "a table that is not there"
if grep -q hunter2 "$WORK/err"; then fail "the password is shown: $(cat "$WORK/err")"; fi
expect_exit 2 kjoin --table "$DB#sales.nosuch" --table-key id --key .customer_id --as .c "$WORK/orders.ndjson"
assert_contains "$WORK/err" "has no table 'sales.nosuch'"
# A row with a null key is a bad table row: exit 65 naming the table and
# the row (it was left out with a warning), or, --on-error skip, left out
# with one warning.
sql "$DB" "CREATE TABLE people (id bigint, name text); INSERT INTO people VALUES (1, 'a'), (NULL, 'b')"
expect_exit 65 kjoin --table "$DB#people" --table-key id --key .customer_id --as .c "$WORK/orders.ndjson"
assert_eq "$(cat "$WORK/err")" "kjoin: error: table people of $DB: row 2: column 'id' is null" "a null key"
echo '{"customer_id":1}' | expect_exit 0 kjoin --table "$DB#people" --table-key id --key .customer_id --as .c \
  --on-error skip
assert_eq "$(cat "$WORK/out")" '{"customer_id":1,"c":{"id":1,"name":"a"}}' "the good row joined"
assert_eq "$(cat "$WORK/err")" \
  "kjoin: warning: left out 1 bad table row (--on-error skip), the first: table people of $DB: row 2: column 'id' is null" \
  "a null key skipped"
# Duplicate keys: an SQL table's rows come in no order, so the row kept was
# any of them; now kjoin refuses the table, naming the key and how many.
sql "$DB" "DELETE FROM people WHERE id IS NULL; INSERT INTO people VALUES (1, 'b'), (1, 'c')"
expect_exit 65 kjoin --table "$DB#people" --table-key id --key .customer_id --as .c "$WORK/orders.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kjoin: error: table people of $DB: key 1 is in 3 rows (again at row 2): a table has one row per key" \
  "duplicate keys"
expect_exit 2 kjoin --table "$DB#customers" --table-key nosuch --key .customer_id --as .c "$WORK/orders.ndjson"
assert_eq "$(cat "$WORK/err")" \
  "kjoin: error: --table-key nosuch: table customers has no such column (it has id, name, tier, score, photo, region)" \
  "a column that is not there"
drop_stores
