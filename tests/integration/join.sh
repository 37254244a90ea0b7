#!/usr/bin/env bash
# kjoin --table kafka:TOPIC in lookup mode: a table topic with several
# updates and tombstones per key (and records without a key, text and
# binary values) read to its end before the first stream record; each
# click joined with its user's row as the table's end holds it, byte for
# byte against a reference computed here with jq; then, live, table
# updates and a tombstone produced mid-run reach later records.
source "$(dirname "$0")/lib.sh"
start_broker users:3 clicks:2 live:1 regions:1
U=$(topic users)
C=$(topic clicks)
L=$(topic live)

# --- the table: rounds of updates (kproduce -k) and tombstones (--envelope) ---
# ops.ndjson logs what was produced, [key, value or null], in order: a key's
# records all go to one partition, in that order, so the last one wins.
: >"$WORK/ops.ndjson"
produce_rows() {  # produce_rows FILE: rows with user_id, keyed by it
  expect_exit 0 kproduce -b "$BROKERS" -t "$U" -k .user_id "$1"
  jq -c '[(.user_id | tostring), .]' "$1" >>"$WORK/ops.ndjson"
}
produce_envelopes() {  # produce_envelopes FILE: envelopes {key, value...}
  expect_exit 0 kproduce -b "$BROKERS" -t "$U" --envelope "$1"
  jq -c '[.key, (if has("value_base64") then {value_base64} else .value end)]' "$1" >>"$WORK/ops.ndjson"
}
rows() {  # rows GEN FILTER: a row for each user 0..39 that FILTER selects
  jq -nc --argjson gen "$1" "range(40) | select($2) |
    {user_id: ., name: \"user-\(.)\", gen: \$gen, tier: (if . % 2 == 0 then \"gold\" else \"plain\" end)}"
}
tombstones() { jq -nc "range(40) | select($1) | {key: tostring, value: null}"; }

rows 1 'true' >"$WORK/round1"
produce_rows "$WORK/round1"
tombstones '. % 4 == 0' >"$WORK/tomb1"
produce_envelopes "$WORK/tomb1"
rows 2 '. % 3 == 0' >"$WORK/round2" # brings back 0, 12, 24, 36
produce_rows "$WORK/round2"
tombstones '. % 5 == 1' >"$WORK/tomb2"
produce_envelopes "$WORK/tomb2"
rows 3 '. % 5 == 1 and . < 20' >"$WORK/round3" # brings back 1, 6, 11, 16
produce_rows "$WORK/round3"
# A text value, a binary value, and a key deleted twice then set again.
cat >"$WORK/odd.ndjson" <<'IN'
{"key":"39","value":"plain text row"}
{"key":"38","value_base64":"AAH/"}
{"key":"37","value":null}
{"key":"37","value":null}
{"key":"37","value":{"user_id":37,"name":"back","gen":4}}
IN
produce_envelopes "$WORK/odd.ndjson"
# A record without a key is no row: skipped.
printf '%s\n' '{"user_id":5,"name":"keyless"}' | kproduce -b "$BROKERS" -t "$U"

# The table as its end holds it: {key: row}, deleted keys absent.
jq -s -c 'reduce .[] as [$k, $v] ({}; if $v == null then del(.[$k]) else .[$k] = $v end)' \
  "$WORK/ops.ndjson" >"$WORK/table.json"
live_rows=$(jq 'length' "$WORK/table.json")
[[ $live_rows -gt 20 && $live_rows -lt 40 ]] || fail "the table has $live_rows rows"

# --- the stream: 400 clicks on users 0..44 (40..44 never in the table),
# user_id a number or a string ---------------------------------------------------
jq -nc 'range(400) | {click: ., user_id: (if . % 2 == 0 then . % 45 else (. % 45 | tostring) end), page: "/p/\(. % 7)"}' \
  >"$WORK/clicks.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$C" "$WORK/clicks.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$C" -e
cp "$WORK/out" "$WORK/consumed.ndjson"
assert_eq "$(lines "$WORK/consumed.ndjson")" 400 "clicks consumed"

# The reference: each envelope with .value.user the row of its user, or null.
jq -c --slurpfile t "$WORK/table.json" '.value.user = ($t[0][.value.user_id | tostring] // null)' \
  "$WORK/consumed.ndjson" >"$WORK/want.ndjson"
joined=$(jq -s 'map(select(.value.user != null)) | length' "$WORK/want.ndjson")
[[ $joined -gt 100 && $joined -lt 400 ]] || fail "the reference joins $joined of 400 clicks"

# The keyless table record is a bad table row (kjoin(1), Tables): it stops
# kjoin, named, unless --on-error skip leaves it out with a warning.
expect_exit 65 kjoin -b "$BROKERS" --table "kafka:$U" --key .value.user_id --as .value.user "$WORK/consumed.ndjson"
grep -qE "^kjoin: error: table topic '$U': partition [0-9]+ offset [0-9]+: the record has no key\$" "$WORK/err" ||
  fail "no error naming the keyless record: $(cat "$WORK/err")"
expect_exit 0 kjoin -v -b "$BROKERS" --table "kafka:$U" --key .value.user_id --as .value.user --on-error skip \
  "$WORK/consumed.ndjson"
assert_files_equal "$WORK/out" "$WORK/want.ndjson"
assert_eq "$(lines "$WORK/err")" 2 "lines on stderr: $(cat "$WORK/err")"
grep -qE "^kjoin: warning: left out a bad table row \(--on-error skip\): table topic '$U': partition [0-9]+ offset [0-9]+: the record has no key\$" "$WORK/err" ||
  fail "no warning of the keyless record: $(cat "$WORK/err")"
assert_eq "$(tail -1 "$WORK/err")" \
  "kjoin: 400 records in, $joined joined, $((400 - joined)) missed, 0 dropped; table $live_rows rows" "summary"

# The same behind kconsume, --on-miss drop: only the joined clicks.
kconsume -b "$BROKERS" -t "$C" -e 2>"$WORK/consume.err" |
  kjoin -b "$BROKERS" --table "kafka:$U" --key .value.user_id --as .value.user --on-miss drop --on-error skip >"$WORK/piped" \
    2>"$WORK/piped.err" || fail "kconsume | kjoin --on-miss drop failed: $(cat "$WORK/consume.err" "$WORK/piped.err")"
jq -c 'select(.value.user != null)' "$WORK/want.ndjson" | sort >"$WORK/want-joined"
sort "$WORK/piped" >"$WORK/got-joined"
assert_files_equal "$WORK/got-joined" "$WORK/want-joined"

# --- a table topic that is not there ---------------------------------------------
# A name that is not there, as a table file or an SQL table (kjoin(1), Table
# problems): a usage error naming it, exit 2 (it was exit 1). Asking about it
# must not create it, even when the client allows auto-creation: a metadata
# request naming the topic did (on Kafka, then kjoin said it did not exist;
# on kbroker kjoin joined with the empty new topic).
M=$(topic missing)
for allow in false true true; do
  expect_exit 2 kjoin -b "$BROKERS" -X allow.auto.create.topics=$allow --table "kafka:$M" --key .value.user_id \
    --as .value.user "$WORK/consumed.ndjson"
  assert_eq "$(cat "$WORK/err")" "kjoin: error: --table: there is no topic '$M' at $BROKERS" "a table topic not there"
  assert_empty "$WORK/out"
done
expect_exit 1 kconsume -b "$BROKERS" -t "$M" -e
assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$M' does not exist" "the topic was not created"

# --- several --key paths: Kafka keys written as the JSON array ------------------

R=$(topic regions)
cat >"$WORK/regions.ndjson" <<'IN'
{"key":"[\"eu\",7]","value":{"name":"eu7"}}
{"key":"[\"eu\",\"7\"]","value":{"name":"eu-string-7"}}
{"key":"[\"us\",7]","value":{"name":"us7"}}
{"key":"[\"us\",7]","value":null}
IN
expect_exit 0 kproduce -b "$BROKERS" -t "$R" --envelope "$WORK/regions.ndjson"
printf '%s\n' '{"r":"eu","n":7}' '{"r":"eu","n":"7"}' '{"n":7,"r":"eu"}' '{"r":"us","n":7}' >"$WORK/pairs.ndjson"
expect_exit 0 kjoin -b "$BROKERS" --table "kafka:$R" --key .r --key .n --as .region "$WORK/pairs.ndjson"
assert_eq "$(cat "$WORK/out")" '{"r":"eu","n":7,"region":{"name":"eu7"}}
{"r":"eu","n":"7","region":{"name":"eu-string-7"}}
{"n":7,"r":"eu","region":{"name":"eu7"}}
{"r":"us","n":7,"region":null}' "composite keys"
assert_empty "$WORK/err"

# --- live: table records produced mid-run reach later records ------------------

mkfifo "$WORK/live-envs"
kconsume -b "$BROKERS" -t "$L" >"$WORK/live-envs" 2>"$WORK/live-consume.err" &
CONSUME_PID=$!
kjoin -b "$BROKERS" --table "kafka:$U" --key .value.user_id --as .value.user --on-error skip <"$WORK/live-envs" \
  >"$WORK/live.out" 2>"$WORK/live.err" &
JOIN_PID=$!

# click USER: one click on the live topic; sets GOT to the row kjoin's
# answer carries.
clicks=0
click() {
  printf '{"click":%d,"user_id":%s}\n' "$clicks" "$1" | kproduce -b "$BROKERS" -t "$L" ||
    fail "kproduce to the live topic failed"
  clicks=$((clicks + 1))
  wait_for "the answer to click $clicks" 60 answered "$clicks"
  GOT=$(sed -n "${clicks}p" "$WORK/live.out" | jq -c '.value.user')
}
answered() {
  kill -0 "$JOIN_PID" 2>/dev/null || fail "kjoin ended: $(cat "$WORK/live.err" "$WORK/live-consume.err")"
  (($(lines "$WORK/live.out") >= $1))
}
# probe USER OLD NEW: clicks until the row is NEW (the table record has
# reached kjoin), every row until then OLD; then once more: still NEW.
probe() {
  local user=$1 old=$2 new=$3 deadline=$((SECONDS + 30))
  while :; do
    click "$user"
    [[ "$GOT" == "$new" ]] && break
    [[ "$GOT" == "$old" ]] || fail "user $user: row $GOT, expected $old or $new"
    ((SECONDS < deadline)) || fail "the table record for user $user did not reach kjoin in 30 s"
  done
  click "$user"
  assert_eq "$GOT" "$new" "user $user's row after the change"
}
row() { jq -c --arg k "$1" '.[$k] // null' "$WORK/table.json"; }

# The table as read at start.
click 2
assert_eq "$GOT" "$(row 2)" "user 2 at start"
click '"4"'
assert_eq "$GOT" "null" "user 4 (deleted) at start"
# An update, a tombstone, and a key new to the table, produced now.
printf '%s\n' '{"user_id":2,"name":"renamed","gen":9}' | kproduce -b "$BROKERS" -t "$U" -k .user_id
probe 2 "$(row 2)" '{"user_id":2,"name":"renamed","gen":9}'
printf '%s\n' '{"key":"3","value":null}' | kproduce -b "$BROKERS" -t "$U" --envelope
probe 3 "$(row 3)" null
printf '%s\n' '{"user_id":44,"name":"new","gen":9}' | kproduce -b "$BROKERS" -t "$U" -k .user_id
probe '"44"' null '{"user_id":44,"name":"new","gen":9}'
# The other rows did not move.
click 1
assert_eq "$GOT" "$(row 1)" "user 1 at the end"

kill -TERM "$CONSUME_PID"
wait "$CONSUME_PID" || true
wait "$JOIN_PID" || fail "kjoin exited $?: $(cat "$WORK/live.err")"
assert_eq "$(lines "$WORK/live.out")" "$clicks" "answers"
# One answer per click, in order.
jq -r '.value.click' "$WORK/live.out" | paste -sd' ' >"$WORK/order"
assert_eq "$(cat "$WORK/order")" "$(seq 0 $((clicks - 1)) | paste -sd' ')" "clicks answered in order"
! grep -v -- '--on-error skip' "$WORK/live.err" | grep -q 'error' || fail "errors: $(cat "$WORK/live.err")"
