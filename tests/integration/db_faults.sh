#!/usr/bin/env bash
# Faults of a store's file (kpipe(7), STORES and EXIT STATUS): a file that
# is not a database, a database of a newer schema version than the program
# knows, a truncated and a corrupted database, a read-only file and a
# read-only file system. Each program that opens the file (kconsume and a
# stateful stage with --state, kcheckpoint, kdlq and --dlq, kupsert --db)
# exits 1 with one line naming the file and the fault, and kcheckpoint
# verify names the fault; nothing there changes the file. SQLite files only:
# a PostgreSQL server's faults are the server's.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "the faults are the store's, not the broker's"
private_mounts
start_broker ev:2
T=$(topic ev)
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 300 -k 20 -s 5 | kproduce -b "$BROKERS" -t "$T" -k .user_id
cd "$WORK"

# A healthy state, dead-letter store and kupsert table to damage.
kconsume -b "$BROKERS" -t "$T" -e --state good.db --checkpoint-interval 20ms |
  kdedup --key .value.event_id --state good.db |
  kcheckpoint commit --state good.db
printf 'not json\n' | kdedup --key .value.event_id --dlq dlq.db -q >/dev/null
kconsume -b "$BROKERS" -t "$T" -e | kupsert --db table.db --table ev --key topic,partition,offset
expect_exit 0 kcheckpoint verify --state good.db

# fails WHAT LINE CMD...: CMD exits 1 with exactly LINE on standard error.
fails() {
  local what=$1 want=$2
  shift 2
  expect_exit 1 "$@"
  assert_eq "$(cat "$WORK/err")" "$want" "$what: '$*'"
}

# Each stateful program on state file $1, all failing with line $2 (its
# program's name put in front).
state_users_fail() {
  local f=$1 why=$2 what=$3
  fails "$what" "kconsume: error: $why" kconsume -b "$BROKERS" -t "$T" -e --state "$f"
  fails "$what" "kdedup: error: $why" kdedup --key .value.event_id --state "$f" </dev/null
  fails "$what" "kwindow: error: $why" kwindow --time .value.ts --key .value.user_id --tumble 1m \
    --agg count --time-format ms --state "$f" </dev/null
  fails "$what" "kcheckpoint: error: $why" kcheckpoint commit --state "$f" </dev/null
  fails "$what" "kcheckpoint: error: $why" kcheckpoint show --state "$f"
}

# 1. Not a database.
echo 'meeting notes, not a database' >notes.txt
cp notes.txt notes.db
state_users_fail notes.db "'notes.db' is not a kpipe state database" "not a database"
fails "not a database" "kcheckpoint: error: 'notes.db' is not a kpipe state database" \
  kcheckpoint verify --state notes.db
fails "not a database" "kdlq: error: 'notes.db' is not a dead-letter store" kdlq list --dlq notes.db
fails "not a database" "kdedup: error: 'notes.db' is not a dead-letter store" \
  kdedup --key .value.event_id --dlq notes.db </dev/null
fails "not a database" "kupsert: error: 'notes.db' is not an SQLite database" \
  kupsert --db notes.db --table ev --key topic,partition,offset </dev/null
cmp -s notes.db notes.txt || fail "a file that is not a database was changed"

# 2. A newer schema version than this program knows.
cp good.db newer.db
v=$(sql newer.db "UPDATE kpipe_schema SET version = version + 1 WHERE component = 'state' RETURNING version")
state_users_fail newer.db \
  "newer.db: the 'state' tables are at schema version $v, newer than this program knows ($((v - 1))); upgrade kpipe" \
  "newer schema"
fails "newer schema" \
  "kcheckpoint: error: newer.db: the 'state' tables are at schema version $v, newer than this program knows ($((v - 1))); upgrade kpipe" \
  kcheckpoint verify --state newer.db
cp dlq.db newer-dlq.db
v=$(sql newer-dlq.db "UPDATE kpipe_schema SET version = version + 1 WHERE component = 'dlq' RETURNING version")
fails "newer schema" \
  "kdlq: error: newer-dlq.db: the 'dlq' tables are at schema version $v, newer than this program knows ($((v - 1))); upgrade kpipe" \
  kdlq list --dlq newer-dlq.db

# 3. Truncated: everything after the first page (the schema) is gone.
page=$(sql good.db "PRAGMA page_size")
cp good.db truncated.db
truncate -s "$page" truncated.db
damaged="state database 'truncated.db': the file is damaged: cut short at $page bytes of the $(stat -c %s good.db) its header records (database disk image is malformed)"
state_users_fail truncated.db "$damaged" "truncated"
fails "truncated" "kcheckpoint: error: $damaged" kcheckpoint verify --state truncated.db
assert_eq "$(stat -c %s truncated.db)" "$page" "the truncated file's size"

# 4. Corrupted: every page after the first (the schema) overwritten with
# noise, then only one page of the stages' saved state.
cp good.db corrupted.db
pages=$(($(stat -c %s corrupted.db) / page))
dd if=/dev/urandom of=corrupted.db bs="$page" seek=1 count=$((pages - 1)) conv=notrunc status=none
cp corrupted.db corrupted.copy
damaged="state database 'corrupted.db': the file is damaged (database disk image is malformed)"
state_users_fail corrupted.db "$damaged" "corrupted"
fails "corrupted" "kcheckpoint: error: $damaged" kcheckpoint verify --state corrupted.db
cmp -s corrupted.db corrupted.copy || fail "a corrupted file was changed"
cp dlq.db corrupted-dlq.db
dd if=/dev/urandom of=corrupted-dlq.db bs="$page" seek=1 count=$(($(stat -c %s dlq.db) / page - 1)) conv=notrunc status=none
fails "corrupted" \
  "kdlq: error: dead-letter store 'corrupted-dlq.db': the file is damaged (database disk image is malformed)" \
  kdlq list --dlq corrupted-dlq.db
if leaf=$(sql good.db "SELECT pageno FROM dbstat WHERE name = 'stage_state' AND pagetype = 'leaf' LIMIT 1" 2>/dev/null); then
  cp good.db one-page.db
  dd if=/dev/urandom of=one-page.db bs="$page" seek=$((leaf - 1)) count=1 conv=notrunc status=none
  got=0
  kcheckpoint verify --state one-page.db >"$WORK/out" 2>"$WORK/err" || got=$?
  assert_eq "$got" 1 "kcheckpoint verify's exit status on a file with a damaged page"
  n=$(wc -l <"$WORK/out")
  ((n > 0)) || fail "kcheckpoint verify listed nothing wrong in a file with a damaged page"
  problems="$n problems"
  [[ $n != 1 ]] || problems="1 problem"
  assert_eq "$(cat "$WORK/err")" "kcheckpoint: error: state database 'one-page.db' has $problems" "kcheckpoint verify"
  fails "one damaged page" \
    "kdedup: error: state database 'one-page.db': the file is damaged (database disk image is malformed)" \
    kdedup --key .value.event_id --state one-page.db </dev/null
else
  echo "(this sqlite3 has no dbstat table: the file with one damaged page is left out)"
fi

# 5. A read-only file: immutable, since root ignores a file's mode. The
# commands that only read it work; those that write it are refused.
cp good.db immutable.db
if chattr +i immutable.db 2>/dev/null; then
  # cleanup reads the test's status from $?: the if gives it back.
  trap 'status=$?; chattr -i "$WORK/immutable.db" 2>/dev/null || true
        if (exit $status); then cleanup; else cleanup; fi' EXIT
  ro="state database 'immutable.db': cannot write: the file or its file system is read-only (Operation not permitted)"
  fails "read-only file" "kconsume: error: $ro" kconsume -b "$BROKERS" -t "$T" -e --state immutable.db
  fails "read-only file" "kdedup: error: $ro" kdedup --key .value.event_id --state immutable.db </dev/null
  expect_exit 0 kcheckpoint verify --state immutable.db
  expect_exit 0 kcheckpoint show --state immutable.db --format ndjson
  [[ -s "$WORK/out" ]] || fail "kcheckpoint show on a read-only file showed nothing"
  chattr -i immutable.db
  trap cleanup EXIT
else
  echo "(this file system has no immutable attribute: the read-only file is left out)"
fi

# 6. A read-only file system: the writers are refused, the readers read.
small_disk "$WORK/ro" 4m
cp good.db dlq.db table.db "$WORK/ro/"
mount -o remount,ro "$WORK/ro"
ro="cannot write: the file or its file system is read-only (Read-only file system)"
fails "read-only file system" "kconsume: error: state database '$WORK/ro/good.db': $ro" \
  kconsume -b "$BROKERS" -t "$T" -e --state "$WORK/ro/good.db"
fails "read-only file system" "kdedup: error: state database '$WORK/ro/good.db': $ro" \
  kdedup --key .value.event_id --state "$WORK/ro/good.db" </dev/null
fails "read-only file system" "kdedup: error: dead-letter store '$WORK/ro/dlq.db': $ro" \
  kdedup --key .value.event_id --dlq "$WORK/ro/dlq.db" </dev/null
fails "read-only file system" "kupsert: error: database '$WORK/ro/table.db': $ro" \
  kupsert --db "$WORK/ro/table.db" --table ev --key topic,partition,offset </dev/null
expect_exit 0 kcheckpoint verify --state "$WORK/ro/good.db"
expect_exit 0 kcheckpoint export --state "$WORK/ro/good.db"
assert_eq "$(jq -s 'map(.offset) | add' "$WORK/out")" 300 "offsets read from a read-only file system"
