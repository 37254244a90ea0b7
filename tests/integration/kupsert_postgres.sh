#!/usr/bin/env bash
# kupsert into a real PostgreSQL (kupsert(1), PostgreSQL; kpipe(7), STORES):
# the columns typed by their first values, upsert and ignore with rows of
# one key folded within a batch (COPY's path and the row-by-row one), a
# value its column refuses as bad input while the rest of its batch lands,
# names quoted, an existing table's key checked, exactly once with --state
# the same database, and a server out of reach or lost: exit 1, the
# password never shown. Runs only with its stores in PostgreSQL.
source "$(dirname "$0")/lib.sh"
if [[ "$KPIPE_TEST_STORE" != postgres ]]; then
  echo "skipped: needs KPIPE_TEST_STORE=postgres (ctest: integration/postgres: kupsert_postgres)"
  exit 77
fi

DB=$(store table)
q() { sql "$DB" "$1"; }
# says TEXT WORDS: TEXT holds WORDS.
says() { [[ "$1" == *"$2"* ]] || fail "'$2' is not in: $(head -c 500 <<<"$1")"; }

# --- types, from the first value each column gets -------------------------------
printf '%s\n' '{"id":1,"n":7,"x":1.5,"s":"a\tb","ok":true,"o":{"k":[1,2]},"a":[1,"two"],"z":null}' |
  expect_exit 0 kupsert --db "$DB" --table typed --key id
assert_eq "$(q "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
  FROM information_schema.columns WHERE table_name = 'typed'")" \
  "id bigint, n bigint, x double precision, s text, ok boolean, o jsonb, a jsonb, z text" "column types"
assert_eq "$(q "SELECT n, x, s = E'a\\tb', ok, o->'k'->>1, a->>1, z IS NULL FROM typed")" \
  "7|1.5|t|t|2|two|t" "typed row"
assert_eq "$(q "SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a
  ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'typed'::regclass AND i.indisprimary")" \
  "id" "primary key"

# --- upsert and ignore, folded within a batch -----------------------------------
# 40 lines over 8 keys, each key's value growing: COPY's path (runs of 8 or
# more rows) folds them, the last winning; a key written again in a later
# batch updates it. A field a row lacks keeps its value.
for i in $(seq 1 40); do echo "{\"k\":$((i % 8)),\"v\":$i,\"first\":$i}"; done >"$WORK/fold.ndjson"
expect_exit 0 kupsert --db "$DB" --table fold --key k "$WORK/fold.ndjson"
assert_eq "$(q "SELECT string_agg(k || '=' || v, ' ' ORDER BY k) FROM fold")" \
  "0=40 1=33 2=34 3=35 4=36 5=37 6=38 7=39" "upsert: the last write wins"
printf '%s\n' '{"k":3,"v":100}' | expect_exit 0 kupsert --db "$DB" --table fold --key k
assert_eq "$(q "SELECT v, first FROM fold WHERE k = 3")" "100|35" "a field the row lacks keeps its value"
expect_exit 0 kupsert --db "$DB" --table kept --key k --mode ignore "$WORK/fold.ndjson"
assert_eq "$(q "SELECT string_agg(k || '=' || v, ' ' ORDER BY k) FROM kept")" \
  "0=8 1=1 2=2 3=3 4=4 5=5 6=6 7=7" "ignore: the first write wins"
# Batches of 6, shorter than COPY's runs: row by row, the same answer.
head -12 "$WORK/fold.ndjson" >"$WORK/few.ndjson"
expect_exit 0 kupsert --db "$DB" --table few --key k --batch 6 "$WORK/few.ndjson"
assert_eq "$(q "SELECT string_agg(k || '=' || v, ' ' ORDER BY k) FROM few")" \
  "0=8 1=9 2=10 3=11 4=12 5=5 6=6 7=7" "row by row"

# --- a value its column refuses is bad input; the rest of the batch lands --------
{
  for i in $(seq 1 20); do echo "{\"id\":$i,\"n\":$i}"; done
  echo '{"id":21,"n":"twenty-one"}'
  echo '{"id":22,"n":true}'
  echo '{"id":23,"n":23,"s":"nul\u0000here"}'
  for i in $(seq 24 30); do echo "{\"id\":$i,\"n\":$i}"; done
} >"$WORK/mixed.ndjson"
printf '%s\n' '{"id":0,"n":0,"s":"text"}' | expect_exit 0 kupsert --db "$DB" --table mixed --key id
DLQ=$(store dlq)
expect_exit 0 kupsert --db "$DB" --table mixed --key id --dlq "$DLQ" "$WORK/mixed.ndjson"
assert_eq "$(q "SELECT count(*), sum(n) FROM mixed")" "28|399" "rows around the refused ones"
assert_eq "$(sql "$DLQ" "SELECT line FROM dead_letters ORDER BY line" | tr '\n' ' ')" "21 22 23 " "dead letters"
says "$(sql "$DLQ" "SELECT reason FROM dead_letters WHERE line = 21")" \
  'invalid input syntax for type bigint: "twenty-one"'
says "$(sql "$DLQ" "SELECT reason FROM dead_letters WHERE line = 23")" "U+0000"
# Under --on-error fail: exit 65, naming the input and the line.
printf '%s\n' '{"id":40,"n":40}' '{"id":41,"n":"x"}' >"$WORK/bad.ndjson"
expect_exit 65 kupsert --db "$DB" --table mixed --key id "$WORK/bad.ndjson"
assert_contains "$WORK/err" "kupsert: error: $WORK/bad.ndjson: line 2: the table refused the row: invalid input syntax for type bigint"

# --- names are data -----------------------------------------------------------
printf '%s\n' '{"we\"ird; --":1,"a.b":"x","Mixed":2}' |
  expect_exit 0 kupsert --db "$DB" --table 'odd "name"; DROP TABLE typed' --key 'we"ird; --'
assert_eq "$(q 'SELECT "a.b", "Mixed" FROM "odd ""name""; DROP TABLE typed"')" "x|2" "quoted names"
assert_eq "$(q "SELECT count(*) FROM typed")" "1" "typed survives a table name"
long=$(printf 'c%.0s' $(seq 64))
expect_exit 65 kupsert --db "$DB" --table longname --key id <<<"{\"id\":1,\"$long\":1}"
assert_contains "$WORK/err" "the name is longer than 63 bytes (64)"

# --- an existing table: its key must be unique ------------------------------------
q "CREATE TABLE mine (id bigint, v text); CREATE TABLE cased (\"v\" text, \"V\" text, id bigint PRIMARY KEY)"
expect_exit 2 kupsert --db "$DB" --table mine --key id <<<'{"id":1,"v":"a"}'
assert_contains "$WORK/err" "has no primary key or unique index on (id): --key must name one"
q "CREATE UNIQUE INDEX mine_id ON mine (id)"
printf '%s\n' '{"id":1,"v":"a"}' '{"ID":1,"V":"b"}' | expect_exit 0 kupsert --db "$DB" --table mine --key id
assert_eq "$(q "SELECT id, v FROM mine")" "1|b" "fields map to columns ignoring ASCII case"
expect_exit 2 kupsert --db "$DB" --table cased --key id <<<'{"id":1}'
assert_contains "$WORK/err" "has columns 'v' and 'V': kupsert ignores ASCII case in names"

# --- exactly once: the rows and the checkpoint in one transaction ----------------
STATE=$(store state)
checkpoint() { echo "{\"\$kpipe\":\"checkpoint\",\"id\":$1,\"at\":1764412345123,\"offsets\":[{\"topic\":\"t\",\"partition\":0,\"offset\":$2}]}"; }
{
  echo '{"k":1,"v":1}'
  checkpoint 1 10
  echo '{"k":2,"v":2}'
  checkpoint 2 20
} | expect_exit 0 kupsert --db "$STATE" --table once --key k --state "$STATE"
assert_eq "$(sql "$STATE" 'SELECT "offset", checkpoint FROM offsets')" "20|2" "offsets stored with the rows"
assert_eq "$(sql "$STATE" "SELECT count(*) FROM once")" "2" "rows"
expect_exit 0 kcheckpoint verify --state "$STATE"
# --table may not be one of kpipe's own tables there.
printf '%s\n' '{"topic":"t","partition":0,"offset":1}' |
  expect_exit 2 kupsert --db "$STATE" --table offsets --key topic,partition
assert_contains "$WORK/err" "--table 'offsets' is one of kpipe's own tables"

# --- a server out of reach, a connection lost ---------------------------------------
# Port 1: nothing listens there (as consume.sh's unreachable broker).
port=1
printf '%s\n' '{"id":1}' |
  expect_exit 1 kupsert --db "postgresql://kpipe:s3cret@127.0.0.1:$port/x" --table t --key id
assert_contains "$WORK/err" "kupsert: error: postgresql://kpipe@127.0.0.1:$port/x: cannot connect:"
grep -q s3cret "$WORK/err" && fail "the password was printed: $(cat "$WORK/err")"
# The server ends kupsert's session while kupsert waits for input.
mkfifo "$WORK/slow"
kupsert --db "$DB" --table lost --key id --batch 1 <"$WORK/slow" >"$WORK/lost.out" 2>"$WORK/lost.err" &
victim=$!
exec 8>"$WORK/slow"
echo '{"id":1}' >&8
wait_for "kupsert's first row" 30 sh -c "[ \"\$(psql -XAtq '$DB' -c 'SELECT count(*) FROM lost' 2>/dev/null)\" = 1 ]"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kupsert[$victim]'" >/dev/null
echo '{"id":2}' >&8
exec 8>&-
status=0
wait "$victim" || status=$?
assert_eq "$status" 1 "kupsert's exit status once its connection is gone"
assert_contains "$WORK/lost.err" "lost the connection"
assert_eq "$(q "SELECT count(*) FROM lost")" "1" "rows after the loss"

# Writers of one table start at once, as the instances of a pipeline do
# (kpipe(7), MANY INSTANCES): the first to make the table makes it, the
# others wait and widen it, and no CREATE TABLE races another. Each is
# released at once from a FIFO, so that they make their first batch
# together.
pids=()
for i in 1 2 3 4; do
  mkfifo "$WORK/race.$i"
  kupsert --db "$DB" --table raced --key id --batch 1 <"$WORK/race.$i" 2>"$WORK/race.$i.err" &
  pids+=($!)
done
for i in 1 2 3 4; do exec {fd}>"$WORK/race.$i"; fds+=("$fd"); done
for i in 1 2 3 4; do printf '{"id":%d,"from":%d,"col%d":true}\n' "$i" "$i" "$i" >&"${fds[$((i - 1))]}"; done
for fd in "${fds[@]}"; do exec {fd}>&-; done
for i in 1 2 3 4; do wait "${pids[$((i - 1))]}" || fail "writer $i failed: $(cat "$WORK/race.$i.err")"; done
assert_eq "$(q "SELECT count(*) FROM raced")" "4" "rows of the writers that started at once"
assert_eq "$(q "SELECT count(*) FROM information_schema.columns WHERE table_name = 'raced'")" "6" \
  "columns: id, from, col1 to col4"
echo "kupsert_postgres: ok"
