#!/usr/bin/env bash
# kupsert: rows by key into SQLite, idempotent; bad input, checkpoints and
# refused options, with exact stdout, stderr and status.
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
cd "$WORK"

q() { sqlite3 -batch -separator '|' "$@"; }

cat >in.ndjson <<'IN'
{"id":"u1","n":1,"tags":["a", "b"]}
{"id":"u2","n":2,"ok":true}
{"$kpipe":"hello"}
{"id":"u1","n":3,"extra":{"x":null}}
{"id":"u3","n":2.5,"ok":false,"name":"it's \"quoted\"; DROP TABLE t; --"}
IN

# Rows land by key (the last write wins); unknown control lines go on.
run 0 kupsert --db out.db --table t --key id in.ndjson
expect_stdout '{"$kpipe":"hello"}
'
expect_no_stderr
q out.db 'SELECT id, n, typeof(n), tags, ok, extra, name FROM t ORDER BY id' >rows
diff - rows <<'OUT' || fail "rows differ"
u1|3|integer|["a","b"]||{"x":null}|
u2|2|integer||1||
u3|2.5|real||0||it's "quoted"; DROP TABLE t; --
OUT

# The same input again leaves the same database.
q out.db .dump >first.sql
run 0 kupsert --db out.db --table t --key id in.ndjson
q out.db .dump >second.sql
cmp -s first.sql second.sql || fail "a second run changed the table: $(diff first.sql second.sql | head -5)"

# ignore: the first write wins.
run 0 kupsert --db first.db --table t --key id --mode ignore in.ndjson
q first.db 'SELECT id, n FROM t ORDER BY id' >rows
diff - rows <<'OUT' || fail "ignore rows differ"
u1|1
u2|2
u3|2.5
OUT

# Bad input under fail: status 65, the line named; the rows before it are in.
printf '{"id":"a","v":1}\n{"v":2}\n{"id":"c","v":3}\n' >bad.ndjson
run 65 kupsert --db bad.db --table t --key id bad.ndjson
expect_stdout ''
expect_stderr 'kupsert: error: bad.ndjson: line 2: key field '\''id'\'' is missing
'
[[ $(q bad.db 'SELECT group_concat(id) FROM t') == a ]] || fail "rows before the bad line not written"

run 0 kupsert --db skip.db --table t --key id --on-error skip bad.ndjson
expect_stderr 'kupsert: warning: skipped 1 bad line
'
[[ $(q skip.db 'SELECT group_concat(id) FROM t') == a,c ]] || fail "skip lost a row"

run 0 kupsert --db dlq.db --table t --key id --on-error dlq --dlq letters.db bad.ndjson
expect_stderr 'kupsert: warning: sent 1 line to the dead-letter store letters.db
'
[[ $(q letters.db 'SELECT stage, reason, line, payload FROM dead_letters') == \
   "kupsert|line 2: key field 'id' is missing|2|{\"v\":2}" ]] || fail "dead letter: $(q letters.db 'SELECT * FROM dead_letters')"

# --dlq alone means --on-error dlq: a store given is a store to use (it was
# ignored, and the first bad line stopped the run).
run 0 kupsert --db implied.db --table t --key id --dlq implied-letters.db bad.ndjson
expect_stderr 'kupsert: warning: sent 1 line to the dead-letter store implied-letters.db
'
[[ $(q implied.db 'SELECT group_concat(id) FROM t') == a,c ]] || fail "--dlq alone lost a row"

# --strict: the first row settles the columns.
printf '{"id":"a","v":1}\n{"id":"b","w":2}\n' | run 65 kupsert --db strict.db --table t --key id --strict
expect_stderr 'kupsert: error: <stdin>: line 2: field '\''w'\'' is not a column of table '\''t'\'' (--strict)
'

# Names that cannot be columns are bad input; hostile ones are names.
printf '{"id":"a","":1}\n' | run 65 kupsert --db names.db --table t --key id
expect_stderr 'kupsert: error: <stdin>: line 1: field '\'''\'' cannot be a column: the name is empty
'
printf '{"id":"a","x\\u0001":1}\n' | run 65 kupsert --db names.db --table t --key id
expect_stderr 'kupsert: error: <stdin>: line 1: field '\''x\u0001'\'' cannot be a column: the name holds a control character (U+0001)
'
printf '{"k\\"]); --":"a","v;":1}\n' | run 0 kupsert --db names.db --table 'a"; DROP TABLE x; --' --key 'k"]); --'
[[ $(q names.db "SELECT \"k\"\"]); --\", \"v;\" FROM \"a\"\"; DROP TABLE x; --\"") == 'a|1' ]] || fail "hostile names"

# Checkpoints without --state go on once the rows before them are in.
printf '{"id":"a"}\n{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}\n' | run 0 kupsert --db cp.db --table t --key id
expect_stdout '{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
'

# With --state naming --db: rows commit with their checkpoint (and at the
# end of the input, the rows after the last one).
cat >cp.ndjson <<'IN'
{"id":"a","v":1}
{"id":"b","v":2}
{"$kpipe":"checkpoint","id":1,"at":1764412345123,"offsets":[{"topic":"events","partition":0,"offset":2}]}
{"id":"c","v":3}
IN
run 0 kupsert --db s.db --table t --key id --state s.db cp.ndjson
expect_stdout ''
expect_no_stderr
[[ $(q s.db 'SELECT group_concat(id) FROM t') == a,b,c ]] || fail "exactly-once rows: $(q s.db 'SELECT * FROM t')"
run 0 kcheckpoint show --state s.db --format ndjson
grep -q '^{"topic":"events","partition":0,"offset":2,"checkpoint":1,' "$WORK/out" || fail "checkpoint not complete: $(cat "$WORK/out")"

run 0 kupsert --db nocp.db --table t --key id --state nocp.db bad.ndjson --on-error skip
expect_stderr 'kupsert: warning: 2 rows arrived but no checkpoint line: run kconsume with --state, and make sure every stage in between lets control lines through (for jq: jq -c '\''if has("$kpipe") then . else ... end'\'')
kupsert: warning: skipped 1 bad line
'

# Options that cannot work are usage errors.
run 2 kupsert --db o.db --table t --key id --mode ignor </dev/null
expect_stderr 'kupsert: error: unknown --mode '\''ignor'\'', did you mean '\''ignore'\''?
'
run 2 kupsert --db o.db --table '' --key id </dev/null
expect_stderr 'kupsert: error: --table '\'''\'': the name is empty
'
run 2 kupsert --db o.db --table sqlite_master --key id </dev/null
expect_stderr 'kupsert: error: --table '\''sqlite_master'\'': names beginning with '\''sqlite_'\'' are reserved for SQLite
'
run 2 kupsert --db o.db --table t --key id,ID </dev/null
expect_stderr 'kupsert: error: --key names the column '\''ID'\'' twice (kupsert ignores ASCII case in names)
'
run 2 kupsert --db o.db --table t --key id --batch 0 </dev/null
expect_stderr 'kupsert: error: --batch must be at least 1
'
run 2 kupsert --db out.db --table t --key n </dev/null
expect_stderr 'kupsert: error: table '\''t'\'' in '\''out.db'\'' has no primary key or unique index on (n): --key must name one
'
run 2 kupsert --db s.db --table offsets --key topic,partition --state ./s.db </dev/null
expect_stderr 'kupsert: error: --table '\''offsets'\'' is one of kpipe'\''s own tables in the state database '\''s.db'\''
'
# Without --state too: a pipeline's state file is never a sink for its own
# tables (this rewrote where the pipeline resumes).
run 2 kupsert --db s.db --table offsets --key topic,partition </dev/null
expect_stderr 'kupsert: error: --table '\''offsets'\'' is one of kpipe'\''s own tables in the state database '\''s.db'\''
'
run 2 kupsert --db out.db --table t --key id --on-error dlq --dlq ./out.db </dev/null
expect_stderr 'kupsert: error: --dlq must name another file than --db: kupsert holds its write lock while dead letters are written
'

# An empty name in --key or --columns is a usage error; CLI11 dropped it,
# and 'a,,b' made a key of a and b.
run 2 kupsert --db o.db --table t --key a,,b </dev/null
expect_stderr 'kupsert: error: --key '\''a,,b'\'': a column name is empty
'
run 2 kupsert --db o.db --table t --key ,a </dev/null
expect_stderr 'kupsert: error: --key '\'',a'\'': a column name is empty
'
run 2 kupsert --db o.db --table t --key id --columns id, </dev/null
expect_stderr 'kupsert: error: --columns '\''id,'\'': a column name is empty
'

# --key and --columns take column names; the path form of a top-level field
# (as every other program's --key takes) names its column, and a path into
# a field is a usage error that says what is expected.
run 2 kupsert --db o.db --table t --key .value.event_id </dev/null
expect_stderr 'kupsert: error: --key '\''.value.event_id'\'': kupsert takes a column name, a top-level field of each line ('\''event_id'\'' or '\''.event_id'\''), not a path into a field (an envelope'\''s value: kconsume -e --format value)
'
run 2 kupsert --db o.db --table t --key id --columns '/a/0' </dev/null
expect_stderr 'kupsert: error: --columns '\''/a/0'\'': kupsert takes a column name, a top-level field of each line ('\''0'\'' or '\''.0'\''), not a path into a field (an envelope'\''s value: kconsume -e --format value)
'
printf '%s\n' '{"event_id":"e1","a.b":1,"n":2}' |
  run 0 kupsert --db paths.db --table t --key .event_id --columns '."a.b",/n'
expect_no_stderr
[[ $(q paths.db 'SELECT event_id, "a.b", n FROM t') == 'e1|1|2' ]] ||
  fail "path forms: $(q paths.db 'SELECT * FROM t')"
# Without a leading dot or slash a name is the column's, dots and all.
printf '%s\n' '{"a.b":"x"}' | run 0 kupsert --db paths.db --table dotted --key a.b
[[ $(q paths.db 'SELECT "a.b" FROM dotted') == x ]] || fail "a.b: $(q paths.db 'SELECT * FROM dotted')"

# The key true is not the key 1 (SQLite finds 1 equal to 1): booleans are
# stored in key columns as their JSON text, 1 and 0 elsewhere.
printf '%s\n' '{"k":1,"v":"one"}' '{"k":true,"v":true}' '{"k":1.0,"v":"1.0"}' |
  run 0 kupsert --db bool.db --table t --key k
expect_no_stderr
q bool.db 'SELECT k, typeof(k), v, typeof(v) FROM t ORDER BY typeof(k)' >rows
diff - rows <<'OUT' || fail "boolean key rows differ"
1|integer|1.0|text
true|text|1|integer
OUT

# Lines that are not JSON are named for what they are, not "not null".
printf '%s\n' nul tru '{"k":1,"v":fals}' | run 65 kupsert --db lit.db --table t --key k
expect_stderr 'kupsert: error: <stdin>: line 1: not valid JSON: '\''nul'\'' is not a JSON value
'
printf '%s\n' nul tru '{"k":1,"v":fals}' null |
  run 0 kupsert --db lit.db --table t --key k --on-error dlq --dlq lit-letters.db
q lit-letters.db 'SELECT reason FROM dead_letters ORDER BY id' >reasons
diff - reasons <<'OUT' || fail "literal reasons differ"
line 1: not valid JSON: 'nul' is not a JSON value
line 2: not valid JSON: 'tru' is not a JSON value
line 3: not valid JSON: 'fals' is not a JSON value
line 4: expected a JSON object, not null
OUT

# A number beyond a double is bad input (SQLite would keep an infinity);
# one beyond 64 bits is a REAL.
printf '%s\n' '{"k":"a","v":1e400}' '{"k":"b","v":123456789012345678901234567890}' |
  run 0 kupsert --db big.db --table t --key k --on-error skip -v
grep -qxF 'kupsert: warning: skipped 1 bad line' "$WORK/err" ||
  fail "1e400 not skipped: $(cat "$WORK/err")"
[[ $(q big.db 'SELECT k, typeof(v) FROM t') == 'b|real' ]] ||
  fail "big rows: $(q big.db 'SELECT * FROM t')"
printf '{"k":"a","v":1e400}\n' | run 65 kupsert --db big.db --table t --key k
expect_stderr "kupsert: error: <stdin>: line 1: field 'v' is 1e400, outside the range of a double
"
