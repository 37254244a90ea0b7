#!/usr/bin/env bash
# kjoin with tables from files and SQLite (no broker): the row set at --as,
# the rest of the line byte for byte; keys of every JSON type; --on-miss;
# bad input and bad tables; usage errors; --as-of over a file's versions;
# control lines in order; tables swapped in while kjoin runs (a file
# renamed over, an SQLite table re-read with --refresh).
source "$(dirname "$0")/lib.sh"

# A usage error exits 2, as for every kpipe program (exit_status.h kUsage,
# tests/cli/common.sh), whatever number the spec's prose gives.
USAGE=2

# sqlite DB SQL: runs SQL on DB with the sqlite3 client, or Python's.
sqlite() {
  if command -v sqlite3 >/dev/null; then
    sqlite3 -batch "$1" "$2"
  else
    python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$1" "$2"
  fi
}
have_sqlite=false
if command -v sqlite3 >/dev/null || python3 -c 'import sqlite3' 2>/dev/null; then have_sqlite=true; fi

# --- lookup: the row at --as, the rest byte for byte ----------------------------

# A row is the table's line as it is (spaces and all). --as replaces the
# value of an existing member where it stands, whitespace around it kept,
# or adds the member at the end of its parent object. A miss is null
# (--on-miss keep, the default). Control lines pass through in order.
cat >"$WORK/users.ndjson" <<'T'
{"id":1,"name":"Ann","tier":"gold"}
{"id": 2, "name": "Bob"}
{"id":"u3","name":"Cy","tags":["a","b"]}
T
cat >"$WORK/clicks.ndjson" <<'IN'
{"uid":1,"n":"added at the end"}
{ "uid" : 2 ,  "n":"spaces kept" , "user" : "old"  }
{"uid":"u3","user":{"old":true,"deep":[1,{"x":2}]},"z":0}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":9,"n":"no such user"}
{"uid":2,"user":null}
{"$kpipe":"other"}
{"uid":1,"meta":{},"z":[1, 2]}
IN
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stdout '{"uid":1,"n":"added at the end","user":{"id":1,"name":"Ann","tier":"gold"}}
{ "uid" : 2 ,  "n":"spaces kept" , "user" : {"id": 2, "name": "Bob"}  }
{"uid":"u3","user":{"id":"u3","name":"Cy","tags":["a","b"]},"z":0}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":9,"n":"no such user","user":null}
{"uid":2,"user":{"id": 2, "name": "Bob"}}
{"$kpipe":"other"}
{"uid":1,"meta":{},"z":[1, 2],"user":{"id":1,"name":"Ann","tier":"gold"}}
'
expect_no_stderr

# The same from standard input; a nested --as into an empty object.
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .meta.user <<<'{"uid":1,"meta":{},"z":[1, 2]}'
expect_stdout '{"uid":1,"meta":{"user":{"id":1,"name":"Ann","tier":"gold"}},"z":[1, 2]}
'
expect_no_stderr

# A member is found by its name, however the line escapes it.
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user <<<'{"uid":1,"us\u0065r":5,"z":1}'
expect_stdout '{"uid":1,"us\u0065r":{"id":1,"name":"Ann","tier":"gold"},"z":1}
'

# Whitespace around the line's object is kept, the member still goes
# inside the object (the line stays JSON).
printf '  {"uid":1}  \n\t{"uid":2, "n":3 }\t\n' >"$WORK/spaced.ndjson"
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/spaced.ndjson"
expect_stdout "$(printf '  %s  \n\t%s\t' '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}' \
  '{"uid":2, "n":3 ,"user":{"id": 2, "name": "Bob"}}')
"
expect_no_stderr

# kconsume envelopes: the row goes into the value (.value.user), keyed by a
# field of the value or by the record's key.
cat >"$WORK/envelopes.ndjson" <<'IN'
{"topic":"clicks","partition":0,"offset":5,"timestamp":1764412345123,"key":"1","value":{"user_id":1,"page":"/a"}}
{"topic":"clicks","partition":1,"offset":7,"timestamp":1764412345124,"key":"u3","headers":[["h","v"]],"value":{"user_id":"u3","user":"stale"}}
{"topic":"clicks","partition":1,"offset":8,"timestamp":1764412345125,"key":"4","value":{"user_id":4}}
IN
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .value.user_id --as .value.user "$WORK/envelopes.ndjson"
expect_stdout '{"topic":"clicks","partition":0,"offset":5,"timestamp":1764412345123,"key":"1","value":{"user_id":1,"page":"/a","user":{"id":1,"name":"Ann","tier":"gold"}}}
{"topic":"clicks","partition":1,"offset":7,"timestamp":1764412345124,"key":"u3","headers":[["h","v"]],"value":{"user_id":"u3","user":{"id":"u3","name":"Cy","tags":["a","b"]}}}
{"topic":"clicks","partition":1,"offset":8,"timestamp":1764412345125,"key":"4","value":{"user_id":4,"user":null}}
'
expect_no_stderr
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .key --as .value.user "$WORK/envelopes.ndjson"
cp "$WORK/out" "$WORK/by-record-key"
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .value.user_id --as .value.user "$WORK/envelopes.ndjson"
cmp -s "$WORK/out" "$WORK/by-record-key" || fail "keyed by .key and by .value.user_id, the joins differ"

# Several stream files, in order.
run 0 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .u <(echo '{"uid":2}') <(echo '{"uid":"1"}')
expect_stdout '{"uid":2,"u":{"id": 2, "name": "Bob"}}
{"uid":"1","u":{"id":1,"name":"Ann","tier":"gold"}}
'

# -v: the summary. A miss kept counts as missed.
run 0 kjoin -v --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stderr 'kjoin: 6 records in, 5 joined, 1 missed, 0 dropped; table 3 rows
'

# --- keys ---------------------------------------------------------------------------

# One path: a string is its unescaped text, a number or true/false the
# text as written, an object or array minified, null no key. So 7 and "7"
# are the same key (as Kafka's key bytes 7 would be), 7.0 is another, and
# "true" is true's.
cat >"$WORK/kinds.ndjson" <<'T'
{"id":7,"v":"seven"}
{"id":"caf\u00e9","v":"cafe"}
{"id":{"b": [1, 2], "a": null},"v":"object"}
{"id":[1,"x"],"v":"array"}
{"id":true,"v":"yes"}
{"id":"-0","v":"minus zero"}
T
cat >"$WORK/keys.ndjson" <<'IN'
{"k":7}
{"k":"7"}
{"k":7.0}
{"k":"café"}
{"k":"caf\u00e9"}
{"k":{"b":[1,2],"a":null}}
{"k":{"a":null,"b":[1,2]}}
{"k":[1, "x"]}
{"k":"[1,\"x\"]"}
{"k":"true"}
{"k":true}
{"k":-0}
{"k":null}
IN
run 0 kjoin --table "$WORK/kinds.ndjson" --table-key .id --key .k --as .r "$WORK/keys.ndjson"
expect_stdout '{"k":7,"r":{"id":7,"v":"seven"}}
{"k":"7","r":{"id":7,"v":"seven"}}
{"k":7.0,"r":null}
{"k":"café","r":{"id":"caf\u00e9","v":"cafe"}}
{"k":"caf\u00e9","r":{"id":"caf\u00e9","v":"cafe"}}
{"k":{"b":[1,2],"a":null},"r":{"id":{"b": [1, 2], "a": null},"v":"object"}}
{"k":{"a":null,"b":[1,2]},"r":null}
{"k":[1, "x"],"r":{"id":[1,"x"],"v":"array"}}
{"k":"[1,\"x\"]","r":{"id":[1,"x"],"v":"array"}}
{"k":"true","r":{"id":true,"v":"yes"}}
{"k":true,"r":{"id":true,"v":"yes"}}
{"k":-0,"r":{"id":"-0","v":"minus zero"}}
{"k":null,"r":null}
'
expect_no_stderr

# Several paths: the JSON array of the values, on both sides, so a number
# and a string differ there (["eu",7] is not ["eu","7"]), and the order of
# the fields in the line does not matter.
cat >"$WORK/regional.ndjson" <<'T'
{"region":"eu","id":7,"name":"eu7"}
{"region":"us","id":7,"name":"us7"}
{"id":"7","region":"eu","name":"eu-string-7"}
T
cat >"$WORK/pairs.ndjson" <<'IN'
{"r":"eu","n":7}
{"r":"us","n":7}
{"r":"eu","n":"7"}
{"n":7,"r":"eu"}
{"r":"eu","n":8}
{"r":"us","n":"7"}
IN
run 0 kjoin -v --table "$WORK/regional.ndjson" --table-key .region --table-key .id --key .r --key .n --as .who \
  "$WORK/pairs.ndjson"
expect_stdout '{"r":"eu","n":7,"who":{"region":"eu","id":7,"name":"eu7"}}
{"r":"us","n":7,"who":{"region":"us","id":7,"name":"us7"}}
{"r":"eu","n":"7","who":{"id":"7","region":"eu","name":"eu-string-7"}}
{"n":7,"r":"eu","who":{"region":"eu","id":7,"name":"eu7"}}
{"r":"eu","n":8,"who":null}
{"r":"us","n":"7","who":null}
'
expect_stderr 'kjoin: 6 records in, 4 joined, 2 missed, 0 dropped; table 3 rows
'

# --- --on-miss ----------------------------------------------------------------------

cat >"$WORK/misses.ndjson" <<'IN'
{"uid":1}
{"uid":9}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":10,"n":"x"}
{"uid":"u3"}
IN
run 0 kjoin --on-miss drop -v --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/misses.ndjson"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":"u3","user":{"id":"u3","name":"Cy","tags":["a","b"]}}
'
expect_stderr 'kjoin: 4 records in, 2 joined, 0 missed, 2 dropped; table 3 rows
'
run 0 kjoin --on-miss keep --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/misses.ndjson"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"uid":9,"user":null}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":10,"n":"x","user":null}
{"uid":"u3","user":{"id":"u3","name":"Cy","tags":["a","b"]}}
'
expect_no_stderr

# dlq: the record as read goes to the dead-letter store, with its reason.
run 0 kjoin --on-miss dlq --dlq "$WORK/dlq.db" -v --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user \
  "$WORK/misses.ndjson"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"uid":"u3","user":{"id":"u3","name":"Cy","tags":["a","b"]}}
'
sort "$WORK/err" >"$WORK/err.sorted"
diff <(printf '%s\n' "kjoin: 4 records in, 2 joined, 2 missed, 0 dropped; table 3 rows" \
  "kjoin: warning: sent 2 lines to the dead-letter store $WORK/dlq.db") "$WORK/err.sorted" >&2 ||
  fail "--on-miss dlq: stderr differs"
run 0 kdlq list --dlq "$WORK/dlq.db" --format ndjson
jq -c '[.stage, .reason, .input, .line, .payload]' "$WORK/out" >"$WORK/letters"
diff <(printf '%s\n' "[\"kjoin\",\"line 2: no row in the table for key 9\",\"$WORK/misses.ndjson\",2,\"{\\\"uid\\\":9}\"]" \
  "[\"kjoin\",\"line 4: no row in the table for key 10\",\"$WORK/misses.ndjson\",4,\"{\\\"uid\\\":10,\\\"n\\\":\\\"x\\\"}\"]") \
  "$WORK/letters" >&2 || fail "kdlq list: the dead letters differ"
run 0 kdlq stats --dlq "$WORK/dlq.db" --by stage --format ndjson
jq -e -s 'length == 1 and .[0].stage == "kjoin" and .[0].count == 2 and .[0].pending == 2' "$WORK/out" >/dev/null ||
  fail "kdlq stats: $(cat "$WORK/out")"

# --- bad input ----------------------------------------------------------------------

# One line on stderr naming the input and the line, exit 65; what came
# before is written.
printf '%s\n' '{"uid":1}' 'not json' '{"uid":2}' >"$WORK/bad"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/bad"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
'
expect_stderr "kjoin: error: $WORK/bad: line 2: not valid JSON: 'not' is not a JSON value
"
printf '%s\n' '{"uid":1}' '{"uid":2}' '{"id":2}' >"$WORK/nokey"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user <"$WORK/nokey"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"uid":2,"user":{"id": 2, "name": "Bob"}}
'
expect_stderr "kjoin: error: <stdin>: line 3: field '.uid' is missing
"
# The parent of --as must be an object: a string there, or no parent.
printf '%s\n' '{"uid":1,"meta":{}}' '{"uid":1,"meta":"text"}' >"$WORK/notobject"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .meta.user "$WORK/notobject"
expect_stdout '{"uid":1,"meta":{"user":{"id":1,"name":"Ann","tier":"gold"}}}
'
expect_stderr "kjoin: error: $WORK/notobject: line 2: --as: field '.meta' is a string, not an object
"
printf '%s\n' '{"uid":1,"meta":[]}' >"$WORK/notobject"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .meta.user "$WORK/notobject"
expect_stdout ''
expect_stderr "kjoin: error: $WORK/notobject: line 1: --as: field '.meta' is an array, not an object
"
printf '%s\n' '{"uid":1}' >"$WORK/noparent"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .meta.user "$WORK/noparent"
expect_stdout ''
expect_stderr "kjoin: error: $WORK/noparent: line 1: --as: field '.meta' is missing
"
# A line that is not an object has no member to set.
printf '%s\n' '[1]' >"$WORK/array"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/array"
expect_stdout ''
expect_stderr "kjoin: error: $WORK/array: line 1: --as: the line is an array, not an object
"
# A miss is bad too when its parent is not an object: the row (null) has
# nowhere to go.
printf '%s\n' '{"uid":9,"meta":5}' >"$WORK/missnotobject"
run 65 kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .meta.user "$WORK/missnotobject"
expect_stderr "kjoin: error: $WORK/missnotobject: line 1: --as: field '.meta' is a number, not an object
"

# --on-error skip: the bad lines go, the rest is joined.
cat "$WORK/bad" "$WORK/nokey" >"$WORK/bad2"
run 0 kjoin --on-error skip --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user "$WORK/bad2"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"uid":2,"user":{"id": 2, "name": "Bob"}}
{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"uid":2,"user":{"id": 2, "name": "Bob"}}
'
expect_stderr 'kjoin: warning: skipped 2 bad lines
'

# --- a bad table --------------------------------------------------------------------

# Read at start: a bad line is an error naming the file and the line, exit
# 65, before any record is read or written.
printf '%s\n' '{"id":1,"name":"Ann"}' '{"id":2,' '{"id":3}' >"$WORK/badtable.ndjson"
run 65 kjoin --table "$WORK/badtable.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/badtable.ndjson: line 2: not valid JSON: truncated object or array
"
printf '%s\n' '{"id":1,"name":"Ann"}' '{"id":2}' '{"name":"no id"}' >"$WORK/badtable.ndjson"
run 65 kjoin --table "$WORK/badtable.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/badtable.ndjson: line 3: field '.id' is missing
"
# A null key is a bad table row as a missing one is (kjoin(1), Tables):
# it was left out with a warning at exit while a missing one stopped kjoin.
printf '%s\n' '{"id":1,"name":"Ann"}' '{"id":null,"name":"nobody"}' '{"id":3}' >"$WORK/badtable.ndjson"
run 65 kjoin --table "$WORK/badtable.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/badtable.ndjson: line 2: field '.id' is null
"
# --on-error skip (or dlq) leaves bad table rows out, told in one warning
# naming the first; a table row is never dead-lettered.
printf '%s\n' '{"id":1,"name":"Ann"}' '{"id":null}' '{"name":"no id"}' '{"id":2,' >"$WORK/badtable.ndjson"
printf '%s\n' '{"uid":1}' '{"uid":2}' | run 0 kjoin --table "$WORK/badtable.ndjson" --table-key .id \
  --key .uid --as .user --on-error skip
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann"}}
{"uid":2,"user":null}
'
expect_stderr "kjoin: warning: left out 3 bad table rows (--on-error skip), the first: table $WORK/badtable.ndjson: line 2: field '.id' is null
"
# Duplicate keys: the table does not say which row is the key's. It kept
# the last in silence; now kjoin stops, naming the key, its rows and where,
# whatever --on-error says (no row of the two is bad on its own).
printf '%s\n' '{"id":1,"v":"a"}' '{"id":2}' '{"id":1,"v":"b"}' '{"id":"1","v":"c"}' '{"id":2}' \
  >"$WORK/duptable.ndjson"
run 65 kjoin --table "$WORK/duptable.ndjson" --table-key .id --key .uid --as .user --on-error skip \
  "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/duptable.ndjson: key 1 is in 3 rows (again at line 3), and 1 other key is in more than one: a table has one row per key
"
# As of, a key may have many rows, one per time: only a (key, time) twice
# is a duplicate.
printf '%s\n' '{"id":1,"t":10}' '{"id":1,"t":20}' '{"id":1,"t":20,"v":"again"}' >"$WORK/duptable.ndjson"
run 65 kjoin --table "$WORK/duptable.ndjson" --table-key .id --table-time .t --key .uid --as .user \
  --as-of .t "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/duptable.ndjson: key 1 at time 1970-01-01T00:00:00.020Z is in 2 rows (again at line 3): a table has one row per key and time (--table-time)
"
# A table file that is not there was named wrongly: a usage error, as a
# column or an SQL table that is not there (it was exit 1).
run 2 kjoin --table "$WORK/no-such-table.ndjson" --table-key .id --key .uid --as .user "$WORK/clicks.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: --table: there is no file '$WORK/no-such-table.ndjson'
"

# --- usage errors -------------------------------------------------------------------

# One line, exit $USAGE, nothing on stdout.
usage() {
  local says=$1
  shift
  run "$USAGE" kjoin "$@" </dev/null
  [[ ! -s "$WORK/out" ]] || fail "kjoin $*: a usage error wrote to stdout"
  expect_stderr "kjoin: error: $says
"
}
T="$WORK/users.ndjson"
usage "--table is required; see 'kjoin --help'" --key .uid --as .user
usage "--key is required: the stream's side of the join" --table "$T" --table-key .id --as .user
usage "--as is required: where the row goes" --table "$T" --table-key .id --key .uid
usage "--table-key is not for kafka: tables: a topic's table is keyed by the record key" \
  --table kafka:users --table-key .id --key .uid --as .user -b localhost:1
usage "--table $T needs --table-key PATH" --table "$T" --key .uid --as .user
usage "--on-miss must be keep, drop or dlq, not 'ignore'" --table "$T" --table-key .id --key .uid --as .user \
  --on-miss ignore
usage "--on-miss dlq needs --dlq FILE.db or --dlq kafka:TOPIC" --table "$T" --table-key .id --key .uid --as .user \
  --on-miss dlq
usage "--as-of with --table $T needs --table-time: the time of each row" --table "$T" --table-key .id --key .uid \
  --as .user --as-of .ts
usage "--as .: the path must end in an object's member (.value.user)" --table "$T" --table-key .id --key .uid --as .
usage "--as .user[0]: the path must end in an object's member (.value.user)" --table "$T" --table-key .id --key .uid \
  --as '.user[0]'
usage "--key: invalid field path '.a[': '[' without ']'" --table "$T" --table-key .id --key '.a[' --as .user
usage "--time-unit: unknown time unit 'days' (choices: s, ms, us, ns)" --table "$T" --table-key .id --key .uid \
  --as .user --as-of .ts --table-time .ts --time-unit days
usage "--table sqlite:$WORK/none.db:t needs --table-key COLUMN" --table "sqlite:$WORK/none.db:t" --key .uid --as .user

# --- --as-of over a file's versions --------------------------------------------------

# Each record gets the newest version of its key at or before its time (at
# is included); before the first version, no row. The file's order is not
# the versions' order. Times are ms numbers or RFC 3339 strings; a file is
# whole, so nothing waits.
cat >"$WORK/prices.ndjson" <<'T'
{"sku":"a","ts":1000,"price":10}
{"sku":"a","ts":3000,"price":12}
{"sku":"b","ts":1500,"price":20}
{"sku":"a","ts":2000,"price":11}
{"sku":"b","ts":"1970-01-01T00:00:04Z","price":21}
T
cat >"$WORK/orders.ndjson" <<'IN'
{"sku":"a","t":999,"n":1}
{"sku":"a","t":1000,"n":2}
{"sku":"b","t":1499,"n":3}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"sku":"a","t":2999,"n":4}
{"sku":"a","t":"1970-01-01T00:00:03Z","n":5}
{"sku":"b","t":3999,"n":6}
{"sku":"c","t":5000,"n":7}
{"sku":"b","t":"1970-01-01T00:00:05.000+00:00","n":8}
{"sku":"a","t":99999,"n":9}
IN
run 0 kjoin --table "$WORK/prices.ndjson" --table-key .sku --table-time .ts --key .sku --as .price --as-of .t \
  "$WORK/orders.ndjson"
expect_stdout '{"sku":"a","t":999,"n":1,"price":null}
{"sku":"a","t":1000,"n":2,"price":{"sku":"a","ts":1000,"price":10}}
{"sku":"b","t":1499,"n":3,"price":null}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"sku":"a","t":2999,"n":4,"price":{"sku":"a","ts":2000,"price":11}}
{"sku":"a","t":"1970-01-01T00:00:03Z","n":5,"price":{"sku":"a","ts":3000,"price":12}}
{"sku":"b","t":3999,"n":6,"price":{"sku":"b","ts":1500,"price":20}}
{"sku":"c","t":5000,"n":7,"price":null}
{"sku":"b","t":"1970-01-01T00:00:05.000+00:00","n":8,"price":{"sku":"b","ts":"1970-01-01T00:00:04Z","price":21}}
{"sku":"a","t":99999,"n":9,"price":{"sku":"a","ts":3000,"price":12}}
'
expect_no_stderr

# Out of order by less than --watermark: the versions an earlier record
# needs are still there.
printf '%s\n' '{"sku":"a","t":3500}' '{"sku":"a","t":1500}' '{"sku":"a","t":500}' '{"sku":"a","t":2500}' \
  >"$WORK/late-orders.ndjson"
run 0 kjoin --table "$WORK/prices.ndjson" --table-key .sku --table-time .ts --key .sku --as .p --as-of .t \
  --watermark 1h "$WORK/late-orders.ndjson"
expect_stdout '{"sku":"a","t":3500,"p":{"sku":"a","ts":3000,"price":12}}
{"sku":"a","t":1500,"p":{"sku":"a","ts":1000,"price":10}}
{"sku":"a","t":500,"p":null}
{"sku":"a","t":2500,"p":{"sku":"a","ts":2000,"price":11}}
'
expect_no_stderr

# --on-miss drop with --as-of: a record before every version goes.
run 0 kjoin -v --on-miss drop --table "$WORK/prices.ndjson" --table-key .sku --table-time .ts --key .sku --as .price \
  --as-of .t "$WORK/orders.ndjson"
[[ $(grep -c '"price":null' "$WORK/out") -eq 0 && $(wc -l <"$WORK/out") -eq 7 ]] ||
  fail "--as-of --on-miss drop: $(cat "$WORK/out")"
grep -q '^kjoin: 9 records in, 6 joined, 0 missed, 3 dropped; table ' "$WORK/err" ||
  fail "--as-of summary: $(cat "$WORK/err")"

# --time-unit applies to both sides' numbers.
printf '%s\n' '{"sku":"a","ts":1,"v":"one"}' '{"sku":"a","ts":2,"v":"two"}' >"$WORK/secs.ndjson"
printf '%s\n' '{"sku":"a","t":1}' '{"sku":"a","t":"1970-01-01T00:00:01.999Z"}' '{"sku":"a","t":2}' \
  >"$WORK/secs-orders.ndjson"
run 0 kjoin --table "$WORK/secs.ndjson" --table-key .sku --table-time .ts --time-unit s --key .sku --as .p --as-of .t \
  "$WORK/secs-orders.ndjson"
expect_stdout '{"sku":"a","t":1,"p":{"sku":"a","ts":1,"v":"one"}}
{"sku":"a","t":"1970-01-01T00:00:01.999Z","p":{"sku":"a","ts":1,"v":"one"}}
{"sku":"a","t":2,"p":{"sku":"a","ts":2,"v":"two"}}
'

# A record without its time, or with one that is not a time, is bad input.
printf '%s\n' '{"sku":"a","t":1000}' '{"sku":"a"}' >"$WORK/notime"
run 65 kjoin --table "$WORK/prices.ndjson" --table-key .sku --table-time .ts --key .sku --as .p --as-of .t "$WORK/notime"
expect_stdout '{"sku":"a","t":1000,"p":{"sku":"a","ts":1000,"price":10}}
'
expect_stderr "kjoin: error: $WORK/notime: line 2: field '.t' is missing
"
printf '%s\n' '{"sku":"a","t":true}' >"$WORK/badtime"
run 65 kjoin --table "$WORK/prices.ndjson" --table-key .sku --table-time .ts --key .sku --as .p --as-of .t "$WORK/badtime"
expect_stderr "kjoin: error: $WORK/badtime: line 1: field '.t' is a bool, not a time
"
# A table row without its time is a bad table line.
printf '%s\n' '{"sku":"a","ts":1000}' '{"sku":"a"}' >"$WORK/notime-table.ndjson"
run 65 kjoin --table "$WORK/notime-table.ndjson" --table-key .sku --table-time .ts --key .sku --as .p --as-of .t \
  "$WORK/orders.ndjson"
expect_stdout ''
expect_stderr "kjoin: error: table $WORK/notime-table.ndjson: line 2: field '.ts' is missing
"

# --- checkpoints with --state ----------------------------------------------------------

# Checkpoint lines pass in order once kjoin has saved its state, and
# kcheckpoint completes them.
printf '%s\n' '{"uid":1}' '{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[{"topic":"t","partition":0,"offset":1}]}' \
  '{"uid":2}' '{"$kpipe":"checkpoint","id":2,"at":6,"offsets":[{"topic":"t","partition":0,"offset":2}]}' >"$WORK/cp"
kjoin --table "$WORK/users.ndjson" --table-key .id --key .uid --as .user --state "$WORK/state.db" "$WORK/cp" \
  2>"$WORK/err" | kcheckpoint commit --state "$WORK/state.db" --passthrough >"$WORK/out"
expect_stdout '{"uid":1,"user":{"id":1,"name":"Ann","tier":"gold"}}
{"uid":2,"user":{"id": 2, "name": "Bob"}}
'
expect_no_stderr
run 0 kcheckpoint show --state "$WORK/state.db" --format ndjson
grep -q '"offset":2' "$WORK/out" || fail "checkpoint 2 did not complete: $(cat "$WORK/out")"

# --- SQLite tables -------------------------------------------------------------------------

if $have_sqlite; then
  # A row is {"column":value,...} in column order: integers and floats as
  # numbers, text as strings, blobs as base64, NULL as null. An integer
  # key column matches 7 and "7".
  sqlite "$WORK/crm.db" "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, score REAL, avatar BLOB, note TEXT);
    INSERT INTO customers VALUES (7, 'Ann', 2.5, X'FF00', NULL);
    INSERT INTO customers VALUES (8, 'Bob \"the builder\"', -1.25, NULL, 'x');
    CREATE TABLE regions (name TEXT, r TEXT, n);
    INSERT INTO regions VALUES ('eu7', 'eu', 7);
    INSERT INTO regions VALUES ('eu-text-7', 'eu', '7');
    INSERT INTO regions VALUES ('us7', 'us', 7);"
  printf '%s\n' '{"value":{"customer_id":7}}' '{"value":{"customer_id":"8","customer":1}}' \
    '{"$kpipe":"other"}' '{"value":{"customer_id":9}}' >"$WORK/orders-sql.ndjson"
  run 0 kjoin --table "sqlite:$WORK/crm.db:customers" --table-key id --key .value.customer_id --as .value.customer \
    "$WORK/orders-sql.ndjson"
  expect_stdout '{"value":{"customer_id":7,"customer":{"id":7,"name":"Ann","score":2.5,"avatar":"/wA=","note":null}}}
{"value":{"customer_id":"8","customer":{"id":8,"name":"Bob \"the builder\"","score":-1.25,"avatar":null,"note":"x"}}}
{"$kpipe":"other"}
{"value":{"customer_id":9,"customer":null}}
'
  expect_no_stderr

  # Several key columns: an integer and a text value keep their types in
  # the key's array (n has no type: SQLite keeps '7' as text there).
  run 0 kjoin --table "sqlite:$WORK/crm.db:regions" --table-key r --table-key n --key .r --key .n --as .x "$WORK/pairs.ndjson"
  expect_stdout '{"r":"eu","n":7,"x":{"name":"eu7","r":"eu","n":7}}
{"r":"us","n":7,"x":{"name":"us7","r":"us","n":7}}
{"r":"eu","n":"7","x":{"name":"eu-text-7","r":"eu","n":"7"}}
{"n":7,"r":"eu","x":{"name":"eu7","r":"eu","n":7}}
{"r":"eu","n":8,"x":null}
{"r":"us","n":"7","x":null}
'

  # --as-of over an SQL table's versions, --table-time a column.
  sqlite "$WORK/crm.db" "CREATE TABLE prices (sku TEXT, ts INTEGER, price INTEGER);
    INSERT INTO prices VALUES ('a', 1000, 10), ('a', 3000, 12), ('a', 2000, 11), ('b', 1500, 20);"
  run 0 kjoin --table "sqlite:$WORK/crm.db:prices" --table-key sku --table-time ts --key .sku --as .price --as-of .t \
    "$WORK/orders.ndjson"
  expect_stdout '{"sku":"a","t":999,"n":1,"price":null}
{"sku":"a","t":1000,"n":2,"price":{"sku":"a","ts":1000,"price":10}}
{"sku":"b","t":1499,"n":3,"price":null}
{"$kpipe":"checkpoint","id":1,"at":5,"offsets":[]}
{"sku":"a","t":2999,"n":4,"price":{"sku":"a","ts":2000,"price":11}}
{"sku":"a","t":"1970-01-01T00:00:03Z","n":5,"price":{"sku":"a","ts":3000,"price":12}}
{"sku":"b","t":3999,"n":6,"price":{"sku":"b","ts":1500,"price":20}}
{"sku":"c","t":5000,"n":7,"price":null}
{"sku":"b","t":"1970-01-01T00:00:05.000+00:00","n":8,"price":{"sku":"b","ts":1500,"price":20}}
{"sku":"a","t":99999,"n":9,"price":{"sku":"a","ts":3000,"price":12}}
'
  expect_no_stderr
  usage "--as-of with --table sqlite:$WORK/crm.db:prices needs --table-time: the time of each row" \
    --table "sqlite:$WORK/crm.db:prices" --table-key sku --key .sku --as .price --as-of .t
fi

# --- tables swapped in while kjoin runs ---------------------------------------------------

# kjoin reads its stream from a fifo and writes to another: each probe
# line written is answered by one line read back (a line must come out
# while the input stays open).
start_live() {  # start_live ERRFILE KJOIN-ARGS...
  local err=$1
  shift
  rm -f "$WORK/live-in" "$WORK/live-out"
  mkfifo "$WORK/live-in" "$WORK/live-out"
  kjoin "$@" <"$WORK/live-in" >"$WORK/live-out" 2>"$err" &
  LIVE=$!
  exec 7>"$WORK/live-in" 8<"$WORK/live-out"
}
# ask LINE: writes LINE, prints kjoin's answer.
ask() {
  local got
  printf '%s\n' "$1" >&7
  read -r -t 20 got <&8 || fail "no answer to '$1' within 20 s"
  printf '%s\n' "$got"
}
# probe LINE OLD NEW: asks LINE until the answer is NEW (the new table is
# in), each answer until then OLD; fails after 20 s.
probe() {
  local line=$1 old=$2 new=$3 got deadline=$((SECONDS + 20))
  while :; do
    got=$(ask "$line")
    [[ "$got" == "$new" ]] && return
    [[ "$got" == "$old" ]] || fail "answer to '$line': got '$got', expected '$old' or '$new'"
    ((SECONDS < deadline)) || fail "the new table did not reach '$line' within 20 s"
    sleep 0.05 # polling: nothing tells when the file has been looked at
  done
}
stop_live() {
  exec 7>&-
  wait "$LIVE" || fail "kjoin on a live input exited $?"
  exec 8<&-
}

# A table file replaced by rename: the new version, whole, for later
# records (a key added, one changed, one gone); a replacement that is bad
# keeps the table as it was and warns once; a good one after it is read.
printf '%s\n' '{"id":1,"v":"one"}' '{"id":2,"v":"two"}' >"$WORK/live.ndjson"
# replace TEXT: the file renamed over the table. Each version replaced is
# kept (a link), so that no new version can take an old one's inode number.
versions=0
replace() {
  versions=$((versions + 1))
  ln "$WORK/live.ndjson" "$WORK/live.old.$versions"
  printf '%s\n' "$@" >"$WORK/live.ndjson.new"
  mv "$WORK/live.ndjson.new" "$WORK/live.ndjson"
}
start_live "$WORK/live-err" --table "$WORK/live.ndjson" --table-key .id --key .id --as .row
assert_answer() { [[ "$(ask "$1")" == "$2" ]] || fail "answer to '$1' is not '$2'"; }
assert_answer '{"id":1}' '{"id":1,"row":{"id":1,"v":"one"}}'
assert_answer '{"id":3}' '{"id":3,"row":null}'
replace '{"id":1,"v":"one, again"}' '{"id":3,"v":"three"}'
probe '{"id":1}' '{"id":1,"row":{"id":1,"v":"one"}}' '{"id":1,"row":{"id":1,"v":"one, again"}}'
assert_answer '{"id":3}' '{"id":3,"row":{"id":3,"v":"three"}}'
assert_answer '{"id":2}' '{"id":2,"row":null}'
replace '{"id":1,"v":"bad version"}' '{"id":'
# The warning says the bad file was seen; until then, and after, the table
# is the one before it.
deadline=$((SECONDS + 20))
until grep -q '^kjoin: warning: ' "$WORK/live-err"; do
  assert_answer '{"id":1}' '{"id":1,"row":{"id":1,"v":"one, again"}}'
  ((SECONDS < deadline)) || fail "no warning about the bad table file within 20 s: $(cat "$WORK/live-err")"
  sleep 0.05 # polling: the warning is the only sign
done
assert_answer '{"id":1}' '{"id":1,"row":{"id":1,"v":"one, again"}}'
assert_answer '{"id":3}' '{"id":3,"row":{"id":3,"v":"three"}}'
replace '{"id":1,"v":"good again"}'
probe '{"id":1}' '{"id":1,"row":{"id":1,"v":"one, again"}}' '{"id":1,"row":{"id":1,"v":"good again"}}'
assert_answer '{"id":3}' '{"id":3,"row":null}'
stop_live
[[ $(wc -l <"$WORK/live-err") -eq 1 ]] || fail "the bad table file was not warned about once: $(cat "$WORK/live-err")"
grep -qF "$WORK/live.ndjson" "$WORK/live-err" || fail "the warning does not name the file: $(cat "$WORK/live-err")"

# An SQLite table re-read every --refresh D.
if $have_sqlite; then
  start_live "$WORK/sql-err" --table "sqlite:$WORK/crm.db:customers" --table-key id --key .c --as .row --refresh 200ms
  assert_answer '{"c":7}' '{"c":7,"row":{"id":7,"name":"Ann","score":2.5,"avatar":"/wA=","note":null}}'
  sqlite "$WORK/crm.db" "UPDATE customers SET name = 'Ann Two' WHERE id = 7; DELETE FROM customers WHERE id = 8;
    INSERT INTO customers VALUES (10, 'Dee', 0.5, NULL, NULL);"
  probe '{"c":7}' '{"c":7,"row":{"id":7,"name":"Ann","score":2.5,"avatar":"/wA=","note":null}}' \
    '{"c":7,"row":{"id":7,"name":"Ann Two","score":2.5,"avatar":"/wA=","note":null}}'
  assert_answer '{"c":8}' '{"c":8,"row":null}'
  assert_answer '{"c":10}' '{"c":10,"row":{"id":10,"name":"Dee","score":0.5,"avatar":null,"note":null}}'
  stop_live
  [[ ! -s "$WORK/sql-err" ]] || fail "--refresh: $(cat "$WORK/sql-err")"
fi
