#!/usr/bin/env bash
# The stores hold payloads: every file the programs create for them (the
# SQLite file, its -wal and -shm, the lock files) is mode 0600 under the
# usual umask 022 (kpipe(7), STORES). Looked at while the programs run,
# since SQLite removes -wal and -shm when the last connection closes.
source "$(dirname "$0")/lib.sh"
[[ "$KPIPE_TEST_STORE" == sqlite ]] || {
  echo "SKIP: $TEST_NAME: file modes are SQLite's"
  exit 77
}
umask 022
start_broker events:1
EVENTS=$(topic events)
printf '{"id":1}\n{"id":2}\n{"no_id":3}\n' | kproduce -b "$BROKERS" -t "$EVENTS" ||
  fail "kproduce failed"

S=$WORK/state.db
D=$WORK/dlq.db
U=$WORK/up.db
H=$WORK/history.db

# exists FILE...: every FILE is there.
exists() {
  local f
  for f in "$@"; do [[ -e "$f" ]] || return 1; done
}
# expect_private FILE...: each FILE is mode 600.
expect_private() {
  local f
  for f in "$@"; do assert_eq "$(stat -c %a "$f")" 600 "mode of ${f#"$WORK"/}"; done
}

# kconsume | kdedup | kcheckpoint commit on one state file; kdedup's bad
# input (no .value.id) to an SQLite dead-letter store.
cat >"$WORK/pipeline.sh" <<EOF
kconsume -b '$BROKERS' -t '$EVENTS' -g '$(group p)' --state '$S' --checkpoint-interval 100ms |
  kdedup --key .value.id --state '$S' --dlq '$D' |
  kcheckpoint commit --state '$S' >/dev/null
EOF
run_pipeline 2>"$WORK/pipeline.err"
# The programs create it: sqlite3, which `completed` reads it with, would
# make an empty one of the umask's mode.
wait_for "the state file" 30 exists "$S.lock"
wait_checkpoints 1
wait_for "the dead letter" 30 exists "$D-wal" "$D-shm"
wait_for "the state's files" 30 exists "$S-wal" "$S-shm" "$S.lock"
expect_private "$S" "$S-wal" "$S-shm" "$S.lock" "$D" "$D-wal" "$D-shm"

# klag --history, sampling until stopped.
klag -b "$BROKERS" --state "$S" --history "$H" --watch 100ms >/dev/null 2>"$WORK/klag.err" &
klag_pid=$!
wait_for "klag's history" 30 exists "$H" "$H-wal" "$H-shm"
expect_private "$H" "$H-wal" "$H-shm"
kill "$klag_pid"
wait "$klag_pid" || true

# kupsert's SQLite table, held open by input still to come.
mkfifo "$WORK/rows"
kupsert --db "$U" --table t --key id <"$WORK/rows" 2>"$WORK/kupsert.err" &
upsert_pid=$!
exec 8>"$WORK/rows"
echo '{"id":1}' >&8
wait_for "kupsert's table" 30 exists "$U" "$U-wal" "$U-shm"
expect_private "$U" "$U-wal" "$U-shm"
exec 8>&-
wait "$upsert_pid" || fail "kupsert failed: $(cat "$WORK/kupsert.err")"

# kdlq replay's lock beside the dead-letter store.
expect_exit 0 kdlq replay --dlq "$D"
expect_private "$D.lock"

# A new state file made by kcheckpoint itself.
printf '{"id":1}\n' | expect_exit 0 kcheckpoint commit --state "$WORK/fresh.db" --passthrough
expect_private "$WORK/fresh.db" "$WORK/fresh.db.lock"

# And nothing else beside them that is not private.
loose=$(find "$WORK" -maxdepth 1 -name '*.db*' ! -perm 600 -printf '%f %m\n')
assert_eq "$loose" "" "store files not mode 600"
echo "PASS: $TEST_NAME"
