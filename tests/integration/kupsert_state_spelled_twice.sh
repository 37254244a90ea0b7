#!/usr/bin/env bash
# kupsert --db and --state naming one database in two spellings are one
# database (kupsert(1), Checkpoints): exactly once, each checkpoint completed
# in the transaction of its rows. On PostgreSQL the two were compared as
# text, so 127.0.0.1 against localhost, or a query string in another order,
# silently made the pipeline at least once, even with -v. Runs on SQLite (a
# file by two paths) and on PostgreSQL (KPIPE_TEST_STORE).
source "$(dirname "$0")/lib.sh"

checkpoint() { printf '{"$kpipe":"checkpoint","id":%s,"at":%s,"offsets":[]}\n' "$1" "$1"; }
# A checkpoint older than the newest complete one is refused when it
# completes: with --state the database of --db the row before it is rolled
# back with it, with another database it has committed already.
{
  echo '{"id":1}'
  checkpoint 5
} >"$WORK/first.ndjson"
{
  echo '{"id":2}'
  checkpoint 3
} >"$WORK/older.ndjson"

# one_database DB STATE: kupsert with --db DB and --state STATE, both one
# database, is exactly once.
one_database() {
  local db=$1 state=$2
  expect_exit 0 kupsert --db "$db" --state "$state" --table t --key id -v "$WORK/first.ndjson"
  assert_contains "$WORK/err" "kupsert: exactly once: --state is the database of --db, where each checkpoint completes with its rows"
  expect_exit 1 kupsert --db "$db" --state "$state" --table t --key id "$WORK/older.ndjson"
  assert_contains "$WORK/err" "checkpoint 3"
  assert_eq "$(sql "$db" "SELECT id FROM t ORDER BY id" | tr '\n' ' ')" "1 " "rows of $state: the row of the refused checkpoint is rolled back with it"
}

if [[ "$KPIPE_TEST_STORE" == postgres ]]; then
  DB=$(store db)
  port=${DB##*:}
  port=${port%%/*}
  name=${DB##*/}
  one_database "$DB?application_name=a&connect_timeout=9" "postgresql://kpipe@localhost:$port/$name?connect_timeout=9&application_name=a"
  DB=$(store db2)
  name=${DB##*/}
  one_database "$DB" "postgresql:dbname=$name user=kpipe port=$port host=localhost"
  # Another database on the same server is another: at least once, said.
  OTHER=$(store other)
  DB=$(store db3)
  expect_exit 0 kupsert --db "$DB" --state "$OTHER" --table t --key id -v "$WORK/first.ndjson"
  assert_contains "$WORK/err" "kupsert: at least once: --state '$OTHER' is another database than --db "
else
  mkdir "$WORK/dir"
  ln -s "$WORK/dir" "$WORK/link"
  one_database "$WORK/dir/one.db" "$WORK/link/../dir/./one.db"
  OTHER=$(store other)
  expect_exit 0 kupsert --db "$WORK/dir/two.db" --state "$OTHER" --table t --key id -v "$WORK/first.ndjson"
  assert_contains "$WORK/err" "kupsert: at least once: --state '$OTHER' is another database than --db '$WORK/dir/two.db'"
fi

echo "kupsert_state_spelled_twice: ok"
