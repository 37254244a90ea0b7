#!/usr/bin/env bash
# The commands that only read a store read one the user may only read
# (README, kcheckpoint(1), kdlq(1)): kcheckpoint show, history, export and
# verify, and kdlq list and stats, on a state file and a dead-letter store of
# another owner, mode 0444, in a directory the user may not write either,
# where SQLite cannot make a reader's shared-memory file. They said "cannot
# write: ... read-only". As root, permissions do not bind: the programs run
# as an unprivileged user then (kcheckpoint_read_only.sh ran as root and
# in a directory of the reader's own, so it saw none of this).
source "$(dirname "$0")/lib.sh"
cd "$WORK"

# The stores, written by their owner in a directory of the owner's.
mkdir ro
printf '%s\n' '{"topic":"t","partition":0,"offset":5}' | run 0 kcheckpoint import --state ro/s.db
printf '%s\n' '{"id":1}' 'not json' | run 0 kdedup --key .id --on-error dlq --dlq ro/dlq.db
chmod 0444 ro/s.db ro/dlq.db
sums=$(md5sum ro/s.db ro/dlq.db)
as_reader=()
if [[ $(id -u) -eq 0 ]]; then
  command -v setpriv >/dev/null || { echo "setpriv is missing: cannot drop root"; exit 77; }
  as_reader=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  chmod 0755 "$WORK" ro
else
  # Another owner cannot be had without root: the user's own directory
  # made read-only binds the user alike.
  chmod 0555 ro
  trap 'status=$?; chmod 0755 "$WORK/ro"; [[ $status -eq 0 ]] && rm -rf "$WORK"; exit $status' EXIT
fi
if "${as_reader[@]}" touch ro/probe 2>/dev/null; then
  fail "the directory is writable to the reader: the test would prove nothing"
fi

run 0 "${as_reader[@]}" kcheckpoint show --state "$WORK/ro/s.db" --format ndjson
expect_no_stderr
[[ $(jq -r .offset "$WORK/out") == 5 ]] || fail "show: $(cat "$WORK/out")"
run 0 "${as_reader[@]}" kcheckpoint history --state "$WORK/ro/s.db" --format ndjson
expect_no_stderr
run 0 "${as_reader[@]}" kcheckpoint export --state "$WORK/ro/s.db"
expect_no_stderr
[[ $(jq -r .offset "$WORK/out") == 5 ]] || fail "export: $(cat "$WORK/out")"
run 0 "${as_reader[@]}" kcheckpoint verify --state "$WORK/ro/s.db"
expect_no_stderr

run 0 "${as_reader[@]}" kdlq list --dlq "$WORK/ro/dlq.db" --format ndjson
expect_no_stderr
[[ $(jq -r .line "$WORK/out") == 2 ]] || fail "list: $(cat "$WORK/out")"
run 0 "${as_reader[@]}" kdlq stats --dlq "$WORK/ro/dlq.db" --format ndjson
expect_no_stderr
[[ $(jq -s length "$WORK/out") == 1 ]] || fail "stats: $(cat "$WORK/out")"

# Nothing was made beside them, and the stores are as they were.
[[ $(ls ro | tr '\n' ' ') == "dlq.db s.db s.db.lock " ]] || fail "files: $(ls ro)"
[[ $(md5sum ro/s.db ro/dlq.db) == "$sums" ]] || fail "a store changed"
