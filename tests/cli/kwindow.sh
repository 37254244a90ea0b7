#!/usr/bin/env bash
# kwindow on the command line: exact output, diagnostics and exit statuses.
source "$(dirname "$0")/lib.sh"

cat >"$WORK/clicks.ndjson" <<'IN'
{"user":"u1","ts":"2026-11-29T10:01:10Z","amount":30}
{"user":"u2","ts":"2026-11-29T10:02:00Z","amount":5}
{"user":"u1","ts":"2026-11-29T10:03:30Z","amount":11}
{"user":"u1","ts":"2026-11-29T10:06:00Z","amount":7}
{"user":"u2","ts":"2026-11-29T10:04:50Z","amount":1}
{"user":"u1","ts":"2026-11-29T10:12:00Z","amount":2}
IN

# Tumbling windows from standard input; the late record is counted.
run 0 kwindow --time .ts --key .user --tumble 5m --agg count --agg sum:.amount <"$WORK/clicks.ndjson"
expect_stdout '{"window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:05:00.000Z","key":"u1","count":2,"sum_amount":41,"emit":"on_time"}
{"window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:05:00.000Z","key":"u2","count":1,"sum_amount":5,"emit":"on_time"}
{"window_start":"2026-11-29T10:05:00.000Z","window_end":"2026-11-29T10:10:00.000Z","key":"u1","count":1,"sum_amount":7,"emit":"on_time"}
{"window_start":"2026-11-29T10:10:00.000Z","window_end":"2026-11-29T10:15:00.000Z","key":"u1","count":1,"sum_amount":2,"emit":"on_time"}
'
expect_stderr 'kwindow: warning: dropped 1 record too late for every window (--late FILE keeps them)
'
# -q silences the warning, not the data.
run 0 kwindow -q --time .ts --key .user --tumble 5m "$WORK/clicks.ndjson"
expect_no_stderr
[[ $(wc -l <"$WORK/out") -eq 4 ]] || fail "-q changed the output"

# A watermark delay takes the record in; --late keeps what is still too late.
run 0 kwindow --time .ts --key .user --tumble 5m --watermark 2m --agg n=count --time-format ms "$WORK/clicks.ndjson"
expect_stdout '{"window_start":1795946400000,"window_end":1795946700000,"key":"u1","n":2,"emit":"on_time"}
{"window_start":1795946400000,"window_end":1795946700000,"key":"u2","n":2,"emit":"on_time"}
{"window_start":1795946700000,"window_end":1795947000000,"key":"u1","n":1,"emit":"on_time"}
{"window_start":1795947000000,"window_end":1795947300000,"key":"u1","n":1,"emit":"on_time"}
'
expect_no_stderr
run 0 kwindow --time .ts --key .user --tumble 5m --late "$WORK/late.ndjson" --time-format ms "$WORK/clicks.ndjson"
expect_no_stderr
[[ $(cat "$WORK/late.ndjson") == '{"user":"u2","ts":"2026-11-29T10:04:50Z","amount":1}' ]] ||
  fail "late file: $(cat "$WORK/late.ndjson")"

# Allowed lateness fires the window again, with the full aggregate.
run 0 kwindow --time .ts --key .user --tumble 5m --allowed-lateness 5m --agg avg:.amount --time-format ms \
  "$WORK/clicks.ndjson"
expect_stdout '{"window_start":1795946400000,"window_end":1795946700000,"key":"u1","avg_amount":20.5,"emit":"on_time"}
{"window_start":1795946400000,"window_end":1795946700000,"key":"u2","avg_amount":5,"emit":"on_time"}
{"window_start":1795946400000,"window_end":1795946700000,"key":"u2","avg_amount":3,"emit":"late"}
{"window_start":1795946700000,"window_end":1795947000000,"key":"u1","avg_amount":7,"emit":"on_time"}
{"window_start":1795947000000,"window_end":1795947300000,"key":"u1","avg_amount":2,"emit":"on_time"}
'
expect_no_stderr

# Sessions and sliding windows.
run 0 kwindow --time .ts --key .user --session 3m --time-format ms "$WORK/clicks.ndjson"
expect_stdout '{"window_start":1795946520000,"window_end":1795946700000,"key":"u2","count":1,"emit":"on_time"}
{"window_start":1795946690000,"window_end":1795946870000,"key":"u2","count":1,"emit":"on_time"}
{"window_start":1795946470000,"window_end":1795946940000,"key":"u1","count":3,"emit":"on_time"}
{"window_start":1795947120000,"window_end":1795947300000,"key":"u1","count":1,"emit":"on_time"}
'
expect_no_stderr
run 0 kwindow --time .ts --slide 10m --every 5m --agg max:.amount --agg distinct:.user --time-format ms \
  "$WORK/clicks.ndjson"
expect_stdout '{"window_start":1795946100000,"window_end":1795946700000,"max_amount":30,"distinct_user":2,"emit":"on_time"}
{"window_start":1795946400000,"window_end":1795947000000,"max_amount":30,"distinct_user":2,"emit":"on_time"}
{"window_start":1795946700000,"window_end":1795947300000,"max_amount":7,"distinct_user":1,"emit":"on_time"}
{"window_start":1795947000000,"window_end":1795947600000,"max_amount":2,"distinct_user":1,"emit":"on_time"}
'
expect_no_stderr

# Epoch seconds, several keys, control lines passed through in place.
printf '%s\n' '{"a":1,"b":"x","t":10}' '{"$kpipe":"checkpoint","id":3,"offsets":[]}' '{"a":1,"b":"x","t":70}' \
  '{"a":2,"b":"x","t":71}' >"$WORK/multi.ndjson"
run 0 kwindow --time .t --time-unit s --key .a --key .b --tumble 1m --time-format ms "$WORK/multi.ndjson"
expect_stdout '{"$kpipe":"checkpoint","id":3,"offsets":[]}
{"window_start":0,"window_end":60000,"key":[1,"x"],"count":1,"emit":"on_time"}
{"window_start":60000,"window_end":120000,"key":[1,"x"],"count":1,"emit":"on_time"}
{"window_start":60000,"window_end":120000,"key":[2,"x"],"count":1,"emit":"on_time"}
'
expect_no_stderr

# Bad input: the input, the line number and the reason; exit 65.
printf '%s\n' '{"user":"u1","ts":1}' '{"user":"u1"}' '{"user":"u1","ts":2}' >"$WORK/bad.ndjson"
run 65 kwindow --time .ts --key .user --tumble 5m <"$WORK/bad.ndjson"
expect_stdout ''
expect_stderr "kwindow: error: <stdin>: line 2: field '.ts' is missing
"
run 65 kwindow --time .ts --key .user --tumble 5m --agg sum:.amount "$WORK/bad.ndjson"
expect_stderr "kwindow: error: $WORK/bad.ndjson: line 1: field '.amount' is missing
"
run 0 kwindow --time .ts --key .user --tumble 5m --on-error skip --time-format ms <"$WORK/bad.ndjson"
expect_stdout '{"window_start":0,"window_end":300000,"key":"u1","count":2,"emit":"on_time"}
'
expect_stderr 'kwindow: warning: skipped 1 bad line
'

# Sums near the 64-bit edges: exact while the result fits, else a float
# with an exponent (or null beyond a float's range) and a warning once of
# each kind.
printf '%s\n' '{"k":"max","ts":1,"v":9223372036854775807}' '{"k":"max","ts":1,"v":100}' \
  '{"k":"max","ts":1,"v":-100}' '{"k":"min","ts":1,"v":-9223372036854775808}' \
  '{"k":"min","ts":1,"v":-1}' '{"k":"big","ts":1,"v":9223372036854775807}' \
  '{"k":"big","ts":1,"v":9223372036854775807}' '{"k":"inf","ts":1,"v":1e308}' \
  '{"k":"inf","ts":1,"v":1e308}' >"$WORK/edges.ndjson"
run 0 kwindow --time .ts --key .k --tumble 1m --agg sum:.v --agg avg:.v --time-format ms \
  "$WORK/edges.ndjson"
expect_stdout '{"window_start":0,"window_end":60000,"key":"max","sum_v":9223372036854775807,"avg_v":3074457345618258432,"emit":"on_time"}
{"window_start":0,"window_end":60000,"key":"min","sum_v":-9.223372036854776e+18,"avg_v":-4611686018427387904,"emit":"on_time"}
{"window_start":0,"window_end":60000,"key":"big","sum_v":1.8446744073709552e+19,"avg_v":9223372036854775808,"emit":"on_time"}
{"window_start":0,"window_end":60000,"key":"inf","sum_v":null,"avg_v":null,"emit":"on_time"}
'
expect_stderr 'kwindow: warning: sum '"'sum_v'"' of the window at 0 with key "min": the sum is -9223372036854775809, beyond 64-bit integers: written as the float -9.223372036854776e+18 (said once)
kwindow: warning: sum '"'sum_v'"' of the window at 0 with key "inf": the sum is beyond the range of a 64-bit float: written as null (said once)
'

# Integers beyond 64 bits are added exactly, not silently as floats: alone
# the sum is written as a float with the same warning, and it may come back.
printf '%s\n' '{"k":"a","ts":1,"v":123456789012345678901234567890}' \
  '{"k":"b","ts":1,"v":123456789012345678901234567890}' '{"k":"b","ts":1,"v":5}' \
  '{"k":"b","ts":1,"v":-123456789012345678901234567890}' >"$WORK/wide.ndjson"
run 0 kwindow --time .ts --key .k --tumble 1m --agg sum:.v --time-format ms "$WORK/wide.ndjson"
expect_stdout '{"window_start":0,"window_end":60000,"key":"a","sum_v":1.2345678901234568e+29,"emit":"on_time"}
{"window_start":0,"window_end":60000,"key":"b","sum_v":5,"emit":"on_time"}
'
expect_stderr 'kwindow: warning: sum '"'sum_v'"' of the window at 0 with key "a": the sum is 123456789012345678901234567890, beyond 64-bit integers: written as the float 1.2345678901234568e+29 (said once)
'

# Event times outside RFC 3339's years, and windows that would end past
# them, are bad input: no line is written that no program reads back.
printf '%s\n' '{"ts":"9999-12-31T22:00:00Z"}' '{"ts":"9999-12-31T23:30:00Z"}' \
  '{"ts":253402300800000}' '{"ts":"9999-12-31T23:59:60Z"}' '{"ts":-62167219200001}' \
  >"$WORK/far.ndjson"
run 65 kwindow --time .ts --tumble 1h "$WORK/far.ndjson"
expect_stdout ''
expect_stderr "kwindow: error: $WORK/far.ndjson: line 2: field '.ts': time 9999-12-31T23:30:00.000Z falls in a window that ends after 9999-12-31T23:59:59.999Z, RFC 3339's last time
"
run 0 kwindow --time .ts --tumble 1h --on-error skip -v "$WORK/far.ndjson"
expect_stdout '{"window_start":"9999-12-31T22:00:00.000Z","window_end":"9999-12-31T23:00:00.000Z","count":1,"emit":"on_time"}
'
expect_stderr "kwindow: warning: skipped 4 bad lines
"
sed -n 3p "$WORK/far.ndjson" >"$WORK/far3.ndjson"
run 65 kwindow --time .ts --tumble 1ms <"$WORK/far3.ndjson"
expect_stderr "kwindow: error: <stdin>: line 1: field '.ts': time '253402300800000' (ms) is outside RFC 3339's range, 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z
"

# --stats: one line of counters at exit.
run 0 kwindow --time .ts --key .user --tumble 5m --stats 1h "$WORK/clicks.ndjson"
grep -v '^kwindow: warning: ' "$WORK/err" | jq -ec 'select(.program == "kwindow" and .in == 6 and .out == 4 and .late == 1 and .dropped == 1)' >/dev/null ||
  fail "stats line: $(cat "$WORK/err")"

# A closed downstream pipe is a normal end.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 20000 -k 5000 -i 100 >"$WORK/many.ndjson"
set +o pipefail
kwindow --time .ts --key .user_id --tumble 1m "$WORK/many.ndjson" 2>"$WORK/err" | head -1 >/dev/null
status=${PIPESTATUS[0]}
set -o pipefail
[[ $status -eq 0 ]] || fail "kwindow | head exited $status"
expect_no_stderr

# Usage errors: one line, exit 2, nothing on stdout.
run 2 kwindow --tumble 5m
expect_stdout ''
expect_stderr "kwindow: error: --time is required; see 'kwindow --help'
"
run 2 kwindow --time .ts
expect_stderr 'kwindow: error: give one of --tumble SIZE, --slide SIZE --every STEP or --session GAP
'
run 2 kwindow --time .ts --tumbel 5m
expect_stderr "kwindow: error: unknown option '--tumbel', did you mean '--tumble'?; see 'kwindow --help'
"
run 2 kwindow --time .ts --tumble 5m --agg summ:.amount
expect_stderr "kwindow: error: unknown aggregate function 'summ', did you mean 'sum'?
"
run 2 kwindow --time .ts --tumble 5 </dev/null
expect_stderr "kwindow: error: --tumble: duration '5' has no unit (write 5s or 5ms)
"
run 2 kwindow --time .ts --slide 1m --every 5m </dev/null
expect_stderr 'kwindow: error: --every 5m is longer than --slide 1m: some records would be in no window
'
run 2 kwindow --time .ts --tumble 1m --time-format rfc </dev/null
expect_stderr "kwindow: error: unknown time format 'rfc', did you mean 'rfc3339'?
"
run 2 kwindow --time .ts --tumble 1m --late dlq </dev/null
expect_stderr 'kwindow: error: --late dlq needs --dlq FILE.db or --dlq kafka:TOPIC
'

# A kafka: dead-letter topic takes the Kafka options, -X and --config too,
# so that it can reach a secured cluster.
run 2 kwindow --time .ts --tumble 1m --dlq kafka:dead -b localhost:1 -X no.such.property=1 </dev/null
expect_stdout ''
expect_stderr 'kwindow: error: kafka property '"'no.such.property'"': No such configuration property: "no.such.property"
'

# Checkpoints without Kafka: kwindow saves its windows at checkpoint 1,
# kcheckpoint completes it, and the next run goes on from there.
if [[ -x "$KPIPE_BIN/kcheckpoint" ]]; then
  printf '%s\n' '{"user":"u1","ts":1000}' '{"user":"u1","ts":61000}' \
    '{"$kpipe":"checkpoint","id":1,"at":1,"offsets":[{"topic":"clicks","partition":0,"offset":2}]}' >"$WORK/part1.ndjson"
  kwindow --state "$WORK/state.db" --time .ts --key .user --tumble 1m --time-format ms "$WORK/part1.ndjson" |
    kcheckpoint commit --state "$WORK/state.db" --passthrough >"$WORK/out" 2>"$WORK/err"
  expect_stdout '{"window_start":0,"window_end":60000,"key":"u1","count":1,"emit":"on_time"}
'
  printf '%s\n' '{"user":"u1","ts":62000}' '{"user":"u1","ts":130000}' >"$WORK/part2.ndjson"
  run 0 kwindow -v --state "$WORK/state.db" --time .ts --key .user --tumble 1m --time-format ms "$WORK/part2.ndjson"
  expect_stdout '{"window_start":60000,"window_end":120000,"key":"u1","count":2,"emit":"on_time"}
'
  expect_stderr "kwindow: restored 'kwindow' as of checkpoint 1: 1 window aggregate, watermark 1970-01-01T00:01:01.000Z
"
fi
