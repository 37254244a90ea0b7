#!/usr/bin/env bash
# Two stages under one name on one --state both exited 0 and left a state
# that restored wrong, and kcheckpoint verify called it sound. The second is
# now refused at start, naming the first's pid (kpipe(7), CONTROL LINES AND
# CHECKPOINTS); verify notices rows changed by another program.
source "$(dirname "$0")/lib.sh"
state=$WORK/p.db
mkfifo "$WORK/dedup.in" "$WORK/commit.in" "$WORK/import.in"

# Each first process reads a FIFO named as its input. Opening the FIFO's
# other end returns once the process opened it, which it does after taking
# its lock: no sleep.
kdedup --state "$state" "$WORK/dedup.in" >"$WORK/dedup.out" 2>"$WORK/dedup.err" &
dedup=$!
exec 3>"$WORK/dedup.in"
kcheckpoint commit --state "$state" "$WORK/commit.in" >"$WORK/commit.out" 2>"$WORK/commit.err" &
commit=$!
exec 4>"$WORK/commit.in"
kcheckpoint import --state "$state" "$WORK/import.in" >/dev/null 2>"$WORK/import.err" &
import=$!
exec 5>"$WORK/import.in"

run 1 kdedup --state "$state" </dev/null
expect_stdout ""
expect_stderr "kdedup: error: stage 'kdedup' of state database '$state' is in use by process $dedup: two stages of a pipeline need distinct --name; one pipeline per state file
"
run 1 kdedup --state "$state" --name kdedup </dev/null
expect_stderr "kdedup: error: stage 'kdedup' of state database '$state' is in use by process $dedup: two stages of a pipeline need distinct --name; one pipeline per state file
"
# Another name is another stage; another program is too.
run 0 kdedup --state "$state" --name second </dev/null
expect_no_stderr
run 0 kwindow --state "$state" --time .ts --tumble 1m </dev/null
expect_no_stderr

run 1 kcheckpoint commit --state "$state" </dev/null
expect_stderr "kcheckpoint: error: stage 'kcheckpoint' of state database '$state' is in use by process $commit: two stages of a pipeline need distinct --name; one pipeline per state file
"
# Offsets are rewritten by one process at a time, never under a running
# pipeline's kconsume (tests/integration/state_lock.sh).
echo '{"topic":"t","partition":0,"offset":5}' >"$WORK/offsets"
run 1 kcheckpoint import --state "$state" "$WORK/offsets"
expect_stderr "kcheckpoint: error: state database '$state' is in use by process $import (the pipeline's kconsume, or another kcheckpoint): stop the pipeline before rewriting its offsets
"

# Once the first ones end, their locks go with them.
exec 3>&- 4>&- 5>&-
wait "$dedup" || fail "the first kdedup failed: $(cat "$WORK/dedup.err")"
wait "$commit" || fail "the first kcheckpoint commit failed: $(cat "$WORK/commit.err")"
wait "$import" || fail "the first kcheckpoint import failed: $(cat "$WORK/import.err")"
run 0 kdedup --state "$state" </dev/null
expect_no_stderr
run 0 kcheckpoint import --state "$state" "$WORK/offsets"
run 0 kcheckpoint verify --state "$state"
expect_stdout ""
[[ -f "$state.lock" ]] || fail "no lock file beside the state database"
[[ "$(stat -c %a "$state.lock")" == 600 ]] || fail "the lock file is not 0600"

# A healthy pipeline's file is sound; a row changed by another program is
# not (item: kupsert --table offsets once rewrote the resume offset).
printf '%s\n' '{"k":1}' '{"$kpipe":"checkpoint","id":1,"at":1764412345123,"offsets":[{"topic":"t","partition":0,"offset":9}]}' |
  kdedup --state "$state" -k .k | kcheckpoint commit --state "$state" >/dev/null
run 0 kcheckpoint verify --state "$state"
expect_stdout ""
command -v sqlite3 >/dev/null || exit 0
sqlite3 "$state" "UPDATE offsets SET offset = 0"
run 1 kcheckpoint verify --state "$state"
expect_stdout "offsets: row t/0 changed outside kpipe
offsets: row t/0 disagrees with checkpoint 1, which stored it
"
expect_stderr "kcheckpoint: error: state database '$state' has 2 problems
"
