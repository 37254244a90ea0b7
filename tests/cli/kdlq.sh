#!/usr/bin/env bash
# kdlq without a broker: guard into an SQLite store, then list, stats,
# replay and purge it; exact stdout, stderr and exit status. Times are the
# wall clock's, so they are dropped (jq 'del(.at)') where output is compared.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

# Good lines keep their exact bytes (spacing, key order); bad ones are
# truncated JSON, a wrong type, a missing field, a scalar, invalid UTF-8
# and a NUL byte.
printf '%s\n' '{"id":"a","ts":1795946400010}' '{"id":"b","ts":17959' '{"id":7,"ts":1}' '{"ts":2}' \
  '{ "id" : "c",  "ts":"2026-11-29T10:00:00Z" }' '42' >in.ndjson
printf '{"id":"\xff","ts":1}\n{"id":"d\x00","ts":1}\n' >>in.ndjson
printf '%s\n' '{"id":"a","ts":1795946400010}' '{ "id" : "c",  "ts":"2026-11-29T10:00:00Z" }' >good.ndjson
printf '%s\n' '{"id":"b","ts":17959' '{"id":7,"ts":1}' '{"ts":2}' '42' >bad.ndjson
printf '{"id":"\xff","ts":1}\n{"id":"d\x00","ts":1}\n' >>bad.ndjson

# Without --dlq, the default --on-error fail stops at the first bad line.
run 65 kdlq guard --require .id:string --require .ts:time in.ndjson
expect_stdout '{"id":"a","ts":1795946400010}
'
expect_stderr "kdlq: error: in.ndjson: line 2: not valid JSON: truncated object or array
"

# With --dlq, bad lines go to the store and good ones pass byte for byte.
run 0 kdlq guard --require .id:string --require .ts:time --dlq bad.db in.ndjson
cmp out good.ndjson || fail "guard changed the good lines"
expect_stderr "kdlq: warning: sent 6 lines to the dead-letter store bad.db
"

run 0 kdlq list --dlq bad.db --format ndjson
jq -c 'del(.at)' out >list.ndjson
diff - list.ndjson <<'EOF' || fail "list differs"
{"id":1,"stage":"kdlq-guard","reason":"line 2: not valid JSON: truncated object or array","input":"in.ndjson","line":2,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload":"{\"id\":\"b\",\"ts\":17959"}
{"id":2,"stage":"kdlq-guard","reason":"line 3: field '.id' is a number, not a string","input":"in.ndjson","line":3,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload":"{\"id\":7,\"ts\":1}"}
{"id":3,"stage":"kdlq-guard","reason":"line 4: field '.id' is missing","input":"in.ndjson","line":4,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload":"{\"ts\":2}"}
{"id":4,"stage":"kdlq-guard","reason":"line 6: the line is a number, not an object","input":"in.ndjson","line":6,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload":"42"}
{"id":5,"stage":"kdlq-guard","reason":"line 7: not valid JSON: invalid UTF-8","input":"in.ndjson","line":7,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload_base64":"eyJpZCI6Iv8iLCJ0cyI6MX0="}
{"id":6,"stage":"kdlq-guard","reason":"line 8: not valid JSON: unescaped control character in a string","input":"in.ndjson","line":8,"source_topic":null,"source_partition":null,"source_offset":null,"failures":1,"replayed":false,"replayed_at":null,"payload":"{\"id\":\"d\u0000\",\"ts\":1}"}
EOF
expect_no_stderr

run 0 kdlq list --dlq bad.db --reason missing --limit 1 --format table
[[ $(wc -l <out) -eq 2 ]] || fail "table: expected a header and one row: $(cat out)"
head -1 out | grep -qE '^ID +AT +STAGE +SOURCE +REPLAYED +REASON +PAYLOAD$' || fail "table header: $(head -1 out)"
# SOURCE and REPLAYED hold only "-": right-aligned, as numbers are.
grep -qE "^ 3  [0-9T:.Z-]+  kdlq-guard       -         -  line 4: field '.id' is missing  \{\"ts\":2\}$" out ||
  fail "table row: $(tail -1 out)"

run 0 kdlq stats --dlq bad.db --format ndjson
jq -c 'del(.first, .last)' out >stats.ndjson
diff - stats.ndjson <<'EOF' || fail "stats differ"
{"reason":"field '.id' is a number, not a string","count":1,"pending":1}
{"reason":"field '.id' is missing","count":1,"pending":1}
{"reason":"not valid JSON: invalid UTF-8","count":1,"pending":1}
{"reason":"not valid JSON: truncated object or array","count":1,"pending":1}
{"reason":"not valid JSON: unescaped control character in a string","count":1,"pending":1}
{"reason":"the line is a number, not an object","count":1,"pending":1}
EOF
run 0 kdlq stats --dlq bad.db --by stage --format table
sed -E 's/  +/ /g; s/ [0-9T:.Z-]{24}//g' out >stats.txt
diff - stats.txt <<'EOF' || fail "stats table differs"
STAGE COUNT PENDING FIRST LAST
kdlq-guard 6 6
total 6 6
EOF

# Replay: the original lines, byte for byte; a second replay has nothing.
run 0 kdlq replay --dlq bad.db --dry-run --format ndjson
[[ $(jq -s 'map(select(.replayed == false)) | length' out) -eq 6 ]] || fail "dry run: $(cat out)"
run 0 kdlq replay --dlq bad.db
cmp out bad.ndjson || fail "replayed lines differ from the bad lines"
expect_no_stderr
run 0 kdlq replay --dlq bad.db -v
expect_stdout ''
expect_stderr "kdlq: replayed 0 entries to <stdout>
"
run 0 kdlq replay --dlq bad.db --again --reason 'UTF-8'
printf '{"id":"\xff","ts":1}\n' | cmp - out || fail "--again --reason replayed the wrong lines"

# Purge what was replayed; a dry run first.
# Without --format, NDJSON when standard output is not a terminal.
run 0 kdlq stats --dlq bad.db --by stage
expect_stdout "$(kdlq stats --dlq bad.db --by stage --format ndjson)
"

run 0 kdlq purge --dlq bad.db --replayed --dry-run
expect_stdout 'would purge 6 entries from bad.db
'
run 0 kdlq purge --dlq bad.db --replayed
expect_stdout 'purged 6 entries from bad.db
'
run 0 kdlq list --dlq bad.db --format ndjson
expect_stdout ''

# Usage errors name what is wrong, in one line.
run 2 kdlq purge --dlq bad.db
expect_stderr "kdlq: error: say what to purge: --replayed, --older-than D, or both (entries that are both)
"
run 2 kdlq lst --dlq bad.db
expect_stderr "kdlq: error: unknown subcommand 'lst', did you mean 'list'?; see 'kdlq --help'
"
run 2 kdlq list
expect_stderr "kdlq: error: --dlq is required; see 'kdlq list --help'
"
run 2 kdlq replay --dlq bad.db --to events
expect_stderr "kdlq: error: --to 'events': expected kafka:TOPIC or kinesis:STREAM (without --to, entries go to standard output)
"
run 2 kdlq stats --dlq bad.db --by reasons
expect_stderr "kdlq: error: unknown --by key 'reasons', did you mean 'reason'?
"
run 2 kdlq guard --require .ts:tim in.ndjson
expect_stderr "kdlq: error: --require '.ts:tim': unknown type 'tim', did you mean 'time'?
"
run 2 kdlq list --dlq kafka:dlq
expect_stderr "kdlq: error: --dlq 'kafka:dlq' needs brokers: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS
"
run 2 kdlq replay --dlq kafka:dlq --reason late -b 127.0.0.1:9
expect_stderr "kdlq: error: a filtered replay of a Kafka dead-letter topic needs its own --group: the replay position is an offset, and the entries the filters pass over would count as replayed
"
# A Kinesis dead-letter stream: refused before any call to the service.
run 2 kdlq purge --dlq kinesis:dead --replayed
expect_stderr "kdlq: error: --dlq 'kinesis:dead': a stream deletes nothing; its entries expire with its retention period
"
run 2 kdlq replay --dlq kinesis:dead
expect_stderr "kdlq: error: --dlq 'kinesis:dead': a replay of a Kinesis dead-letter stream keeps its position in --state STORE (an SQLite file or postgresql://...)
"
run 2 kdlq replay --dlq kinesis:dead --state s.db --to kinesis:dead
expect_stderr "kdlq: error: --to 'kinesis:dead' is the dead-letter stream itself
"
run 2 kdlq replay --dlq kinesis:dead --state s.db --reason late
expect_stderr "kdlq: error: a filtered replay of a Kinesis dead-letter stream needs its own --group: the replay position is a sequence number in each shard, and the entries the filters pass over would count as replayed
"
run 2 kdlq list --dlq kinesis:dead --group g
expect_stderr "kdlq: error: --group names a replay ledger in --state STORE, which is missing
"
run 2 kdlq list --dlq bad.db --state s.db
expect_stderr "kdlq: error: --state is for a Kinesis dead-letter stream's replay position, not for 'bad.db'
"
[[ ! -e s.db ]] || fail "a refused command created the state store"
run 1 kdlq list --dlq missing.db
expect_stderr "kdlq: error: dead-letter store 'missing.db' does not exist
"
[[ ! -e missing.db ]] || fail "list created the store it was asked to read"
