#!/usr/bin/env bash
# kcheckpoint's reading commands open the state read-only: a missing file
# is an error (it was created empty, exit 0), a file that is not a state
# database is named, and a file the user may only read can be shown and
# verified (they failed with "Permission denied").
source "$(dirname "$0")/lib.sh"
cd "$WORK"

for cmd in show history export verify; do
  run 1 kcheckpoint "$cmd" --state typo.db
  expect_stderr "kcheckpoint: error: state database 'typo.db' does not exist
"
  [[ ! -e typo.db ]] || fail "kcheckpoint $cmd created typo.db"
done

echo 'not a database' >notes.db
run 1 kcheckpoint show --state notes.db
expect_stderr "kcheckpoint: error: 'notes.db' is not a kpipe state database
"

# A file the user may only read, in a directory of the user's: SQLite
# makes its shared-memory file beside it, as for any reader.
mkdir reader
printf '%s\n' '{"topic":"t","partition":0,"offset":5}' | run 0 kcheckpoint import --state reader/s.db
chmod 0444 reader/s.db
# As root, permissions do not bind: read as an unprivileged user instead.
as_reader=()
if [[ $(id -u) -eq 0 ]]; then
  command -v setpriv >/dev/null || { echo "setpriv is missing: cannot drop root"; exit 77; }
  chmod 0711 "$WORK"
  chown 65534:65534 reader
  as_reader=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
run 0 "${as_reader[@]}" kcheckpoint show --state "$WORK/reader/s.db" --format ndjson
[[ $(jq -r .offset "$WORK/out") == 5 ]] || fail "show on a read-only file: $(cat "$WORK/out")"
run 0 "${as_reader[@]}" kcheckpoint verify --state "$WORK/reader/s.db"
