#!/usr/bin/env bash
# A replay round trip through kbroker: records from Kafka fail a guard and
# land in the store with their source positions; replayed to a topic they
# come back with their original key, headers and timestamp; replayed to
# standard output they are the lines kconsume wrote, byte for byte; a
# replay sends each entry once; a replayed line that fails again is a new
# entry.
source "$(dirname "$0")/lib.sh"
start_broker events:3 fixed:3
T=$(topic events)
F=$(topic fixed)
# The dead-letter store: an SQLite file or a PostgreSQL database (lib.sh).
BAD=$(store bad)

# Good and bad events, with keys, headers (repeated, null, binary) and
# timestamps; the bad ones lack .value.ts or hold the wrong type.
cat >"$WORK/in.ndjson" <<'IN'
{"key":"u1","timestamp":1764412345001,"headers":[["trace","a1"]],"value":{"user_id":"u1","ts":1764412345001}}
{"key":"u2","timestamp":1764412345002,"headers":[["trace","a2"],["trace","b2"],["empty",null]],"value":{"user_id":"u2"}}
{"key":"u3","timestamp":1764412345003,"value":{"user_id":3,"ts":1764412345003}}
{"key":"u4","timestamp":1764412345004,"headers":[["bin",{"base64":"/wA="}]],"value":{"user_id":"u4","ts":"soon"}}
{"key":"u5","timestamp":1764412345005,"value":{"user_id":"u5","ts":"2026-11-29T10:15:30Z"}}
{"key":null,"timestamp":1764412345006,"value":"not an object"}
IN
expect_exit 0 kproduce -b "$BROKERS" -t "$T" --envelope "$WORK/in.ndjson"
kconsume -b "$BROKERS" -t "$T" -e >"$WORK/consumed.ndjson"
[[ $(wc -l <"$WORK/consumed.ndjson") -eq 6 ]] || fail "expected 6 records"

kdlq guard --require .value.user_id:string --require .value.ts:time --dlq "$BAD" \
  <"$WORK/consumed.ndjson" >"$WORK/good.ndjson" 2>"$WORK/guard.err"
assert_eq "$(jq -r .key "$WORK/good.ndjson" | sort | tr '\n' ' ')" "u1 u5 " "records passed"
grep -vE '"key":"u[15]"' "$WORK/consumed.ndjson" >"$WORK/bad.ndjson"

# Each entry knows where its record came from.
expect_exit 0 kdlq list --dlq "$BAD" --format ndjson
jq -c '[.source_topic, .source_partition, .source_offset]' "$WORK/out" | sort >"$WORK/sources"
jq -c '[.topic, .partition, .offset]' "$WORK/bad.ndjson" | sort >"$WORK/want.sources"
assert_files_equal "$WORK/want.sources" "$WORK/sources"

# To Kafka: original key, headers and timestamp, plus the id of the entry.
expect_exit 0 kdlq replay --dlq "$BAD" --to "kafka:$F" -b "$BROKERS" -v
assert_contains "$WORK/err" "kdlq: replayed 4 entries to kafka:$F"
kconsume -b "$BROKERS" -t "$F" -e >"$WORK/fixed.ndjson"
[[ $(wc -l <"$WORK/fixed.ndjson") -eq 4 ]] || fail "expected 4 replayed records, got $(wc -l <"$WORK/fixed.ndjson")"
project='{key, timestamp, value, headers: ((.headers // []) | map(select(.[0] != "kpipe.replay.id")))}'
jq -c "$project" "$WORK/bad.ndjson" | sort >"$WORK/want.records"
jq -c "$project" "$WORK/fixed.ndjson" | sort >"$WORK/got.records"
assert_files_equal "$WORK/want.records" "$WORK/got.records"
store_id=$(jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/fixed.ndjson" | cut -d: -f1 | sort -u)
[[ $store_id =~ ^[0-9a-f]{16}$ ]] || fail "replay ids do not name one store: $store_id"
assert_eq "$(jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/fixed.ndjson" | cut -d: -f2 | sort -n |
  tr '\n' ' ')" "1 2 3 4 " "replayed entry ids"

# Nothing is sent twice.
expect_exit 0 kdlq replay --dlq "$BAD" --to "kafka:$F" -b "$BROKERS" -v
assert_contains "$WORK/err" "kdlq: replayed 0 entries to kafka:$F"
expect_exit 0 kdlq stats --dlq "$BAD" --by topic --format ndjson
assert_eq "$(jq -c '[.topic, .count, .pending]' "$WORK/out")" "[\"$T\",4,0]" "stats after the replay"

# To standard output (again): the lines as kconsume wrote them.
expect_exit 0 kdlq replay --dlq "$BAD" --again
assert_files_equal "$WORK/bad.ndjson" "$WORK/out"

# The replayed records fail the same guard again: new entries, from the
# fixed topic; the first ones keep their history.
kconsume -b "$BROKERS" -t "$F" -e |
  kdlq guard --require .value.user_id:string --require .value.ts:time --dlq "$BAD" >/dev/null 2>&1
expect_exit 0 kdlq stats --dlq "$BAD" --by topic --format ndjson
jq -c '[.topic, .count, .pending]' "$WORK/out" | sort >"$WORK/got.stats"
printf '["%s",4,0]\n["%s",4,4]\n' "$T" "$F" | sort >"$WORK/want.stats"
assert_files_equal "$WORK/want.stats" "$WORK/got.stats"
