#!/usr/bin/env bash
# Readers during writes: sqlite3 processes query the table while kupsert
# writes it. With --state naming --db, each checkpoint's rows and its
# completion commit together, so a reader sees the rows of whole
# checkpoints only (rows == the stored offset), and, the database being in
# WAL mode, no reader ever fails with "database is locked" (sqlite3 runs
# without a busy timeout here, so any lock would show). Needs no broker.
#
# The readers: a dashboard's long-lived sqlite3 session, read-write (as
# people open it), asking again and again; and sqlite3 processes that open
# the file read-only, query once and exit, as fast as they can. (Read-write
# processes that open and close all the time lock each other, and every
# other opener, out for a moment as they close: each tries for an
# exclusive lock to see whether it is the last connection. That is SQLite
# with or without kupsert: wal.html, "Sometimes queries return SQLITE_BUSY
# in WAL mode".)
#
# With KPIPE_TEST_STORE=postgres the database is on a PostgreSQL server
# (lib.sh, store) and the readers are psql: the dashboard one session, the
# others short-lived read-only connections. What is checked is the same:
# readers see whole checkpoints only, never fail, never see the table
# shrink.
source "$(dirname "$0")/lib.sh"
[[ $KPIPE_TEST_STORE == postgres ]] || command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }

GROUPS_N=20 ROWS=1500
DB=$(store s)

# Group g: ROWS rows with ids that never repeat, then the checkpoint that
# says ROWS * g records are done.
group() {
  local g=$1
  awk -v g="$g" -v n="$ROWS" 'BEGIN {
    for (i = 0; i < n; i++)
      printf "{\"id\":%d,\"g\":%d,\"pad\":\"%0100d\",\"nested\":{\"i\":%d}}\n", (g - 1) * n + i, g, i, i
    printf "{\"$kpipe\":\"checkpoint\",\"id\":%d,\"at\":%d,\"offsets\":[{\"topic\":\"t\",\"partition\":0,\"offset\":%d}]}\n", g, 1000 + g, g * n
  }'
}

# What a reader sees, in one read transaction: the rows and the offset
# their checkpoint stored, as one column "ROWS OFFSET" (|| joins them in
# both dialects). Readers run only while kupsert has the database open: with
# SQLite, the last connection to close deletes the WAL, and one opening the
# file meanwhile can find it locked.
QUERY="SELECT (SELECT COUNT(*) FROM w) || ' ' || (SELECT COALESCE(MAX(\"offset\"), 0) FROM offsets);"
: >"$WORK/reader.err"

# The table and the state tables exist before the readers start.
group 1 | kupsert --db "$DB" --table w --key id --state "$DB"

# The dashboard: one connection, one read transaction per question.
start_dashboard() {
  rm -f "$WORK/seen.dashboard"
  coproc DASHBOARD { sql_session "$DB" 2>>"$WORK/reader.err"; }
}
ask() {
  echo "$QUERY" >&"${DASHBOARD[1]}"
  read -r -t 30 answer <&"${DASHBOARD[0]}" || fail "the dashboard did not answer: $(cat "$WORK/reader.err")"
  echo "$answer" >>"$WORK/seen.dashboard"
}
stop_dashboard() {
  local pid=$DASHBOARD_PID
  eval "exec ${DASHBOARD[1]}>&-"
  wait "$pid"
}

# Short-lived read-only readers, until told to stop.
reader() {
  while [[ ! -e "$WORK/stop" ]]; do
    sql --readonly "$DB" "$QUERY" >>"$WORK/seen.reader$1" 2>>"$WORK/reader.err" ||
      echo "the reader's client exited $?" >>"$WORK/reader.err"
  done
}
start_readers() {
  rm -f "$WORK/stop" "$WORK"/seen.reader?
  reader 1 &
  READERS=$!
  reader 2 &
  READERS="$READERS $!"
}
# Until each short-lived reader has read once more since the call: a
# group's writes then always overlap some reads, however slow the client
# starts (psql takes tens of milliseconds, sqlite3 one or two, and
# PostgreSQL takes a group in less).
read_again() {
  local r1 r2
  r1=$(lines "$WORK/seen.reader1") r2=$(lines "$WORK/seen.reader2")
  read_since() { (($(lines "$WORK/seen.reader1") > r1 && $(lines "$WORK/seen.reader2") > r2)); }
  wait_for "the readers to read again (their errors: $WORK/reader.err)" 30 read_since
}
stop_readers() {
  touch "$WORK/stop"
  wait $READERS
  cat "$WORK/seen.dashboard" "$WORK"/seen.reader? >"$WORK/seen"
  local reads distinct
  reads=$(cat "$WORK"/seen.reader? | wc -l)
  ((reads >= 20)) || fail "only $reads reads happened during the writes"
  distinct=$(sort -u "$WORK/seen" | wc -l)
  ((distinct >= 3)) || fail "the readers saw only $distinct states: they did not overlap the writes"
}

# kupsert forwards a control line it does not know once it has the
# database open: that is the sign that readers may start.
mkfifo "$WORK/in" "$WORK/out"
start_kupsert() {
  kupsert "$@" <"$WORK/in" >"$WORK/out" 2>"$WORK/kupsert.err" &
  KUPSERT=$!
  exec 3>"$WORK/in" 4<"$WORK/out"
  echo '{"$kpipe":"ping"}' >&3
  read -r -t 30 pong <&4 || fail "kupsert did not start: $(cat "$WORK/kupsert.err")"
  assert_eq "$pong" '{"$kpipe":"ping"}' "kupsert's forwarded control line"
}
start_kupsert --db "$DB" --table w --key id --state "$DB"
start_dashboard
start_readers
for ((g = 2; g <= GROUPS_N; g++)); do
  group "$g" >&3
  read_again
  # Wait until the dashboard sees this checkpoint: the next group is
  # written while the readers keep querying.
  want=$((g * ROWS))
  until ask && [[ "$answer" == "$want $want" ]]; do :; done
done
stop_readers
stop_dashboard
exec 3>&- 4<&-
wait "$KUPSERT" || fail "kupsert failed: $(cat "$WORK/kupsert.err")"

assert_empty "$WORK/reader.err"
assert_empty "$WORK/kupsert.err"
# Every read saw whole checkpoints: as many rows as the offset stored.
torn=$(awk '$1 != $2' "$WORK/seen" | head -3)
[[ -z "$torn" ]] || fail "a reader saw rows without their checkpoint (rows offset): $torn"
assert_eq "$(sql "$DB" "$QUERY")" "$((GROUPS_N * ROWS)) $((GROUPS_N * ROWS))" "final state"

# Without --state, batches: readers still never wait, and never see the
# table shrink.
DB=$(store b)
QUERY='SELECT COUNT(*) FROM w;'
start_kupsert --db "$DB" --table w --key id --batch 997
echo '{"id":-1}' >&3
# The table exists once the first row lands (on the pause after it).
until [[ "$(has_table "$DB" w 2>>"$WORK/reader.err")" == 1 ]]; do :; done
start_dashboard
start_readers
for ((g = 1; g <= GROUPS_N; g++)); do
  group "$g" | grep -v kpipe >&3
  read_again
  # The pause after a group lands it whole.
  want=$((g * ROWS + 1))
  until ask && [[ "$answer" == "$want" ]]; do :; done
done
stop_readers
stop_dashboard
exec 3>&- 4<&-
wait "$KUPSERT" || fail "kupsert failed: $(cat "$WORK/kupsert.err")"
assert_empty "$WORK/reader.err"
for seen in dashboard reader1 reader2; do
  sort -n -c "$WORK/seen.$seen" || fail "a reader saw the table shrink"
done
assert_eq "$(sql "$DB" "$QUERY")" "$((GROUPS_N * ROWS + 1))" "final rows"
