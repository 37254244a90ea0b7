#!/usr/bin/env bash
# kdedup: the first record of each key passes byte for byte, later ones are
# dropped or written to --dups; horizons, eviction, bad input, usage
# errors, the -v summary, and snapshots at checkpoints with --state.
source "$(dirname "$0")/lib.sh"

# --- keys ------------------------------------------------------------------

# A key is the minified JSON text at the path: {"id": 1} and {"id":1} share
# one, the string "1" is another. Passed lines keep their own bytes;
# control lines pass through in order.
cat >"$WORK/in.ndjson" <<'IN'
{"id": 1, "n": "first"}
{"id":1,"n":"second"}
{"id":"1","n":"a string"}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"id":{"a": [1, 2]},"n":"object"}
{"id":{"a":[1,2]},"n":"same object, minified"}
{"$kpipe":"other"}
{"id":{"a":[2,1]},"n":"another object"}

{"id": 1}
IN
run 0 kdedup --key .id "$WORK/in.ndjson"
expect_stdout '{"id": 1, "n": "first"}
{"id":"1","n":"a string"}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"id":{"a": [1, 2]},"n":"object"}
{"$kpipe":"other"}
{"id":{"a":[2,1]},"n":"another object"}
'
expect_no_stderr

# The same from standard input, with a JSON Pointer, and with --exact.
run 0 kdedup --key /id --exact <"$WORK/in.ndjson"
cp "$WORK/out" "$WORK/exact"
run 0 kdedup -k .id <"$WORK/in.ndjson"
cmp -s "$WORK/out" "$WORK/exact" || fail "--exact and hashed keys disagree"

# Without --key, the key is the whole line as bytes.
printf '%s\n' '{"a":1}' '{"a": 1}' '{"a":1}' '[1,2]' '"s"' '[1,2]' >"$WORK/lines"
run 0 kdedup "$WORK/lines"
expect_stdout '{"a":1}
{"a": 1}
[1,2]
"s"
'

# Several paths: the key is their values together, kept apart (1 and 23
# are not 12 and 3).
printf '%s\n' '{"u":"a","d":1}' '{"u":"a","d":2}' '{"d":1,"u":"a"}' '{"u":"b","d":1}' \
  '{"u":1,"d":23}' '{"u":12,"d":3}' >"$WORK/pairs"
run 0 kdedup -k .u -k .d "$WORK/pairs"
expect_stdout '{"u":"a","d":1}
{"u":"a","d":2}
{"u":"b","d":1}
{"u":1,"d":23}
{"u":12,"d":3}
'

# kdedup decides each line when the next arrives; before it waits for
# input, it writes what it held back. A line must come out while the input
# stays open.
mkfifo "$WORK/live-in" "$WORK/live-out"
kdedup -k .id <"$WORK/live-in" >"$WORK/live-out" 2>"$WORK/live-err" &
live=$!
exec 7>"$WORK/live-in" 8<"$WORK/live-out"
echo '{"id":1}' >&7
read -r -t 20 got <&8 || fail "a line was held back while kdedup waited for input"
[[ "$got" == '{"id":1}' ]] || fail "live: got '$got'"
printf '%s\n' '{"id":1}' '{"id":2}' >&7
read -r -t 20 got <&8 || fail "the second line was held back"
[[ "$got" == '{"id":2}' ]] || fail "live: got '$got' after a duplicate"
exec 7>&-
wait "$live" || fail "kdedup on a live input exited $?"
exec 8<&-
[[ ! -s "$WORK/live-err" ]] || fail "live: $(cat "$WORK/live-err")"

# --- horizons ----------------------------------------------------------------

# Remembered from the record's time until the largest time seen passes it
# by more than --within; numbers are epoch ms, strings RFC 3339. A record
# already beyond the horizon (n 5: 1150 < 1300 - 100) passes and is not
# remembered.
cat >"$WORK/timed" <<'IN'
{"id":"k","ts":1000,"n":1}
{"id":"k","ts":1100,"n":2}
{"id":"k","ts":1101,"n":3}
{"id":"x","ts":"1970-01-01T00:00:01.300Z","n":4}
{"id":"k","ts":1150,"n":5}
{"id":"k","ts":1250,"n":6}
{"id":"k","ts":1260,"n":7}
IN
run 0 kdedup -k .id --within 100ms --time .ts "$WORK/timed"
expect_stdout '{"id":"k","ts":1000,"n":1}
{"id":"k","ts":1101,"n":3}
{"id":"x","ts":"1970-01-01T00:00:01.300Z","n":4}
{"id":"k","ts":1150,"n":5}
{"id":"k","ts":1250,"n":6}
'
expect_no_stderr

# Seconds with --time-unit s.
printf '%s\n' '{"id":1,"t":10}' '{"id":1,"t":69}' '{"id":1,"t":71}' >"$WORK/secs"
run 0 kdedup -k .id --within 1m --time .t --time-unit s "$WORK/secs"
expect_stdout '{"id":1,"t":10}
{"id":1,"t":71}
'

# Processing time: within an hour, a repeat is dropped.
run 0 kdedup -k .id --within 1h "$WORK/secs"
expect_stdout '{"id":1,"t":10}
'

# --- eviction -------------------------------------------------------------------

printf '%s\n' '{"id":1}' '{"id":2}' '{"id":3}' '{"id":1}' '{"id":4}' '{"id":2}' '{"id":1}' >"$WORK/evict"
run 0 kdedup -k .id --max-keys 3 "$WORK/evict"
expect_stdout '{"id":1}
{"id":2}
{"id":3}
{"id":4}
{"id":1}
'
expect_stderr 'kdedup: warning: evicted 2 keys to stay within --max-keys 3: their duplicates pass again
'

# --- duplicates kept, summary ----------------------------------------------------

run 0 kdedup -k .id --dups "$WORK/dups" -v "$WORK/evict"
expect_stdout '{"id":1}
{"id":2}
{"id":3}
{"id":4}
'
expect_stderr 'kdedup: 7 records in, 4 passed, 3 dropped; 4 keys remembered, 0 evicted
'
diff <(printf '%s\n' '{"id":1}' '{"id":2}' '{"id":1}') "$WORK/dups" >&2 || fail "--dups FILE differs"

if command -v sqlite3 >/dev/null; then
  run 0 kdedup -k .id --dups dlq --dlq "$WORK/dlq.db" "$WORK/evict"
  expect_stderr 'kdedup: warning: sent 3 lines to the dead-letter store '"$WORK/dlq.db"'
'
  got=$(sqlite3 "$WORK/dlq.db" "SELECT stage, reason, input, line, payload FROM dead_letters ORDER BY id")
  [[ "$got" == "kdedup|line 4: duplicate of an earlier record with key 1|$WORK/evict|4|{\"id\":1}
kdedup|line 6: duplicate of an earlier record with key 2|$WORK/evict|6|{\"id\":2}
kdedup|line 7: duplicate of an earlier record with key 1|$WORK/evict|7|{\"id\":1}" ]] ||
    fail "dead letters: $got"
fi

# --- bad input ----------------------------------------------------------------------

printf '%s\n' '{"id":1}' '{"n":2}' 'not json' '{"id":1}' '{"id":3}' >"$WORK/bad"
run 65 kdedup -k .id "$WORK/bad"
expect_stdout '{"id":1}
'
expect_stderr "kdedup: error: $WORK/bad: line 2: field '.id' is missing
"
run 0 kdedup -k .id --on-error skip -v "$WORK/bad"
expect_stdout '{"id":1}
{"id":3}
'
expect_stderr 'kdedup: warning: skipped 2 bad lines
kdedup: 5 records in, 2 passed, 1 dropped, 2 bad; 2 keys remembered, 0 evicted
'
# Without --key too, a line must be JSON.
run 65 kdedup <"$WORK/bad"
expect_stderr "kdedup: error: <stdin>: line 3: not valid JSON: 'not' is not a JSON value
"

printf '%s\n' '{"id":1,"ts":true}' >"$WORK/badtime"
run 65 kdedup -k .id --within 1m --time .ts "$WORK/badtime"
expect_stderr "kdedup: error: $WORK/badtime: line 1: field '.ts' is a bool, not a time
"
printf '%s\n' '{"id":1,"ts":"yesterday"}' >"$WORK/badtime"
run 65 kdedup -k .id --within 1m --time .ts "$WORK/badtime"
expect_stderr "kdedup: error: $WORK/badtime: line 1: field '.ts': 'yesterday' is not an RFC 3339 time (expected a yyyy-mm-dd date)
"

# --- usage errors ------------------------------------------------------------------------

usage() {
  run 2 kdedup "$@" </dev/null
  [[ ! -s "$WORK/out" ]] || fail "a usage error wrote to stdout"
}
usage --time .ts
expect_stderr 'kdedup: error: --time needs --within: without a horizon, times are not used
'
usage --within 10
expect_stderr "kdedup: error: --within: duration '10' has no unit (write 10s or 10ms)
"
usage --max-keys 0
expect_stderr 'kdedup: error: --max-keys must be between 1 and 4000000000
'
usage --dups dlq
expect_stderr 'kdedup: error: --dups dlq needs --dlq FILE.db or --dlq kafka:TOPIC
'
usage -k '.a['
expect_stderr "kdedup: error: --key: invalid field path '.a[': '[' without ']'
"
usage --within 1m --time .t --time-unit days
expect_stderr "kdedup: error: --time-unit: unknown time unit 'days' (choices: s, ms, us, ns)
"

# A kafka: dead-letter topic takes the Kafka options, -X and --config too,
# so that it can reach a secured cluster.
run 2 kdedup -k .id --dlq kafka:dead --config "$WORK/missing.properties" </dev/null
expect_stdout ''
expect_stderr "kdedup: error: cannot open config file '$WORK/missing.properties': No such file or directory
"

# --- --state: a snapshot at each checkpoint, restored on start -------------------------

# kcheckpoint commit completes each checkpoint after kdedup has saved its
# snapshot; the second run restores the keys of the first.
cat >"$WORK/run1" <<'IN'
{"id":1}
{"id":2}
{"id":1}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[{"topic":"t","partition":0,"offset":3}]}
{"id":3}
{"$kpipe":"checkpoint","id":2,"at":6,"offsets":[{"topic":"t","partition":0,"offset":4}]}
IN
cat >"$WORK/run2" <<'IN'
{"id":3}
{"id":4}
{"id":2}
{"$kpipe":"checkpoint","id":3,"at":7,"offsets":[{"topic":"t","partition":0,"offset":7}]}
IN
kdedup -k .id --state "$WORK/state.db" -v <"$WORK/run1" 2>"$WORK/err1" |
  kcheckpoint commit --state "$WORK/state.db" --passthrough >"$WORK/out1"
diff <(printf '%s\n' '{"id":1}' '{"id":2}' '{"id":3}') "$WORK/out1" >&2 || fail "--state: first run"
diff <(echo 'kdedup: 4 records in, 3 passed, 1 dropped; 3 keys remembered, 0 evicted') "$WORK/err1" >&2 ||
  fail "--state: first run's stderr"
kdedup -k .id --state "$WORK/state.db" -v <"$WORK/run2" 2>"$WORK/err2" |
  kcheckpoint commit --state "$WORK/state.db" --passthrough >"$WORK/out2"
diff <(printf '%s\n' '{"id":4}') "$WORK/out2" >&2 || fail "--state: second run"
diff <(printf '%s\n' "kdedup: restored 3 keys of 'kdedup' from checkpoint 2 in '$WORK/state.db'" \
  'kdedup: 3 records in, 1 passed, 2 dropped; 4 keys remembered, 0 evicted') "$WORK/err2" >&2 ||
  fail "--state: second run's stderr"

# Another --name is another stage: it starts empty.
run 0 kdedup -k .id --state "$WORK/state.db" --name other "$WORK/run2"
expect_stdout '{"id":3}
{"id":4}
{"id":2}
{"$kpipe":"checkpoint","id":3,"at":7,"offsets":[{"topic":"t","partition":0,"offset":7}]}
'

# The state records the options that decide what its keys mean: another
# --key, or times that measure something else, is refused by name before
# anything is read or written.
run 1 kdedup -k .user_id --state "$WORK/state.db" "$WORK/run2"
expect_stdout ''
expect_stderr "kdedup: error: the saved state of 'kdedup' was made with --key .id, not --key .user_id: give another --name or state file
"
run 1 kdedup -k .id --within 1d --time .ts --state "$WORK/state.db" "$WORK/run2"
expect_stderr "kdedup: error: the saved state of 'kdedup' was made with no --within, not --time .ts --time-unit ms: give another --name or state file
"
# --max-keys may change between runs.
run 0 kdedup -k .id --max-keys 10 --state "$WORK/state.db" "$WORK/run2"
expect_stdout '{"$kpipe":"checkpoint","id":3,"at":7,"offsets":[{"topic":"t","partition":0,"offset":7}]}
'
expect_no_stderr

# A malformed checkpoint line is bad input that names its line.
printf '%s\n' '{"id":1}' '{"$kpipe":"checkpoint","id":"x"}' >"$WORK/badcp"
run 65 kdedup -k .id --state "$WORK/state.db" --name bad "$WORK/badcp"
expect_stderr "kdedup: error: $WORK/badcp: line 2: checkpoint line: 'id' must be a non-negative integer
"

# --metrics naming a folder: a warning, the records pass, and no
# FOLDER.tmp is left behind (it was, after the failed rename).
mkdir "$WORK/metrics"
printf '%s\n' '{"id":1}' >"$WORK/one"
run 0 kdedup -k .id --metrics "$WORK/metrics" "$WORK/one"
expect_stdout '{"id":1}
'
expect_stderr "kdedup: warning: cannot rename '$WORK/metrics.tmp' to '$WORK/metrics': Is a directory
"
[[ ! -e "$WORK/metrics.tmp" ]] || fail "--metrics left $WORK/metrics.tmp behind"
