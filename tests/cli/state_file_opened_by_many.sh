#!/usr/bin/env bash
# The stages of a pipeline open a new state file at the same moment. SQLite
# does not wait on its busy handler while a new file switches to WAL, so
# this once failed with "database is locked" about one time in twenty.
source "$(dirname "$0")/lib.sh"
for i in $(seq 100); do
  rm -f "$WORK/s.db" "$WORK/s.db-wal" "$WORK/s.db-shm"
  # commit creates the file (show only reads an existing one); each under
  # a name of its own, as the stages of one pipeline are.
  for j in 1 2 3; do kcheckpoint commit --state "$WORK/s.db" --name "c$j" </dev/null >/dev/null 2>"$WORK/err$j" & done
  wait
  for j in 1 2 3; do
    [[ ! -s "$WORK/err$j" ]] || fail "round $i: $(cat "$WORK/err$j")"
  done
done
