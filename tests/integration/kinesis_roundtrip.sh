#!/usr/bin/env bash
# kproduce and kconsume on a Kinesis stream of 4 shards (kinesis-mock, the
# fixture's): 2000 records keyed by one of 40 users, each value numbered
# within its user, go in with kproduce -k and come back with kconsume
# --from earliest -e, each once, with its key and value, every user's in
# the order written, from all 4 shards; every envelope's offset is a JSON
# string of digits, and each envelope (shard, sequence number, key, data,
# arrival time) is what the service itself gives when its shards are read
# with curl's own SigV4 signing. Records an independent writer puts (curl,
# PutRecords) are read the same way, at the sequence numbers PutRecords
# answered. kproduce refuses an envelope with headers, or with a null
# value, as bad input naming its line, after writing the lines before it;
# kconsume -g on a stream is a usage error. Diagnostics are one line.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
N=2000 USERS=40

stream_json() { jq -nc --arg s "$STREAM" '{StreamName: $s}'; }
kinesis_stream "$STREAM" 4

# --- kproduce, then kconsume -------------------------------------------------------
# user-K's values are numbered 0, 1, 2... in the order written ("n"); "i"
# is the line's number in the input.
jq -nc --argjson n "$N" --argjson u "$USERS" \
  'range($n) | {user: "user-\(. % $u)", n: ((. / $u) | floor), i: ., text: "record \(.) é"}' >"$WORK/input.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user "${AWS[@]}" "$WORK/input.ndjson"
assert_empty "$WORK/out"
assert_empty "$WORK/err"

expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
mv "$WORK/out" "$WORK/got.ndjson"
assert_empty "$WORK/err"
assert_eq "$(lines "$WORK/got.ndjson")" "$N" "records kconsume read"
# Each record once, with its key and its value.
jq -c '{key: .user, value: .}' "$WORK/input.ndjson" | sort >"$WORK/want.kv"
jq -c '{key, value}' "$WORK/got.ndjson" | sort >"$WORK/got.kv"
assert_files_equal "$WORK/got.kv" "$WORK/want.kv"
# Envelopes name the stream, and each record's key is its user.
assert_eq "$(jq -r '.topic' "$WORK/got.ndjson" | sort -u)" "$STREAM" "the envelopes' topic"
assert_eq "$(jq -c -s 'map(select(.key != .value.user)) | .[:3][]' "$WORK/got.ndjson")" "" "envelopes keyed by another field"
# Every user's values in the order written: 0, 1, 2... as they come.
out_of_order=$(jq -r '"\(.key) \(.value.n)"' "$WORK/got.ndjson" |
  awk '$2 != next_n[$1] + 0 && bad == "" { bad = $0 } { next_n[$1] = $2 + 1 } END { print bad }')
assert_eq "$out_of_order" "" "the first record out of its user's order (user n)"
# All four shards gave records (the users' MD5 hashes fall on each).
assert_eq "$(jq -r .partition "$WORK/got.ndjson" | sort -n -u | paste -sd,)" "0,1,2,3" "partitions read"
# The offset is a sequence number: a JSON string of its digits, never a
# number (56 digits: a double would round them).
bad_offsets=$(jq -c -s 'map(select((.offset | type) != "string" or (.offset | test("^[0-9]+$") | not)) | .offset)
  | .[:3][]' "$WORK/got.ndjson")
assert_eq "$bad_offsets" "" "offsets that are not strings of digits"
# Sequence numbers only grow within a shard, in the order kconsume wrote
# them (compared as numbers: by length, then digit by digit).
unsorted=$(jq -r '"\(.partition) \(.offset | length) \(.offset)"' "$WORK/got.ndjson" |
  awk '{ seq = $3 ""; if (bad == "" && $1 in last && ($2 < len[$1] || ($2 == len[$1] && seq <= last[$1]))) bad = $0
         len[$1] = $2; last[$1] = seq } END { print bad }')
assert_eq "$unsorted" "" "a sequence number not above its shard's previous one"

# read_shards FILE: every shard read from TRIM_HORIZON to its tip with
# curl (GetRecords, as kinesis_emulator.sh does), as envelopes would name
# each record: {partition, offset, key, value, timestamp}, sorted.
read_shards() {
  local shards shard iterator answer
  : >"$WORK/service.ndjson"
  shards=$(kinesis_api ListShards "$(stream_json)" | jq -r '.Shards[].ShardId')
  for shard in $shards; do
    iterator=$(kinesis_api GetShardIterator "$(jq -nc --arg s "$STREAM" --arg id "$shard" \
      '{StreamName: $s, ShardId: $id, ShardIteratorType: "TRIM_HORIZON"}')" | jq -r .ShardIterator)
    while :; do
      answer=$(kinesis_api GetRecords "$(jq -nc --arg i "$iterator" '{ShardIterator: $i}')")
      jq -c --arg shard "$shard" '.Records[] | {partition: ($shard | ltrimstr("shardId-") | tonumber),
          offset: .SequenceNumber, key: .PartitionKey, value: (.Data | @base64d | fromjson),
          timestamp: (.ApproximateArrivalTimestamp * 1000 | round)}' <<<"$answer" >>"$WORK/service.ndjson"
      [[ $(jq '.Records | length' <<<"$answer") != 0 || $(jq .MillisBehindLatest <<<"$answer") != 0 ]] || break
      iterator=$(jq -r .NextShardIterator <<<"$answer")
    done
  done
  jq -c -s 'sort_by(.partition, (.offset | length), .offset) | .[]' "$WORK/service.ndjson" >"$1"
}
envelopes() { jq -c -s 'map({partition, offset, key, value, timestamp}) |
  sort_by(.partition, (.offset | length), .offset) | .[]' "$1"; }
read_shards "$WORK/service.sorted"
envelopes "$WORK/got.ndjson" >"$WORK/got.sorted"
assert_files_equal "$WORK/got.sorted" "$WORK/service.sorted"

# --- an independent writer: curl's PutRecords ---------------------------------------
# 100 records of 20 keys of their own; what PutRecords answered for each
# (its shard and sequence number) is where kconsume must find it.
jq -nc '[range(100) | {key: "other-\(. % 20)", data: {from: "curl", j: ., text: "ünïcode \(.)"}}]' >"$WORK/put.records"
kinesis_api PutRecords "$(jq -c --arg s "$STREAM" \
  '{StreamName: $s, Records: [.[] | {PartitionKey: .key, Data: (.data | tojson | @base64)}]}' "$WORK/put.records")" \
  >"$WORK/put.answer"
assert_eq "$(jq .FailedRecordCount "$WORK/put.answer")" 0 "PutRecords' FailedRecordCount"
jq -c --slurpfile put "$WORK/put.answer" '[., $put[0].Records] | transpose[] |
    {partition: (.[1].ShardId | ltrimstr("shardId-") | tonumber), offset: .[1].SequenceNumber,
     key: .[0].key, value: .[0].data}' "$WORK/put.records" | sort >"$WORK/put.want"

expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
mv "$WORK/out" "$WORK/again.ndjson"
assert_empty "$WORK/err"
assert_eq "$(lines "$WORK/again.ndjson")" $((N + 100)) "records kconsume read the second time"
jq -c 'select(.value.from == "curl") | {partition, offset, key, value}' "$WORK/again.ndjson" | sort >"$WORK/put.got"
assert_files_equal "$WORK/put.got" "$WORK/put.want"
# kproduce's records are where they were, and the whole agrees with the
# service's own reading.
jq -c 'select(.value.from != "curl")' "$WORK/again.ndjson" | envelopes /dev/stdin >"$WORK/again.sorted"
assert_files_equal "$WORK/again.sorted" "$WORK/got.sorted"
read_shards "$WORK/service.sorted"
envelopes "$WORK/again.ndjson" >"$WORK/again.all"
assert_files_equal "$WORK/again.all" "$WORK/service.sorted"
# Each key's records in PutRecords' order too.
out_of_order=$(jq -r 'select(.value.from == "curl") | "\(.key) \(.value.j)"' "$WORK/again.ndjson" |
  awk '$1 in last && $2 <= last[$1] && bad == "" { bad = $0 } { last[$1] = $2 } END { print bad }')
assert_eq "$out_of_order" "" "the first curl record out of its key's order (key j)"

# --- what a Kinesis record cannot be ---------------------------------------------
# one_line: the diagnostic is a single line, and names the line refused.
one_line() {
  assert_eq "$(lines "$WORK/err")" 1 "lines of the diagnostic ($(cat "$WORK/err"))"
  assert_contains "$WORK/err" "$1"
}
# An envelope with headers: the line before it is written, then exit 65.
printf '%s\n' '{"key":"bad-1","value":{"from":"refusals","n":0}}' \
  '{"key":"bad-1","value":{"from":"refusals","n":1},"headers":[["trace","a1"]]}' \
  '{"key":"bad-1","value":{"from":"refusals","n":2}}' >"$WORK/headers.ndjson"
expect_exit 65 kproduce -t "kinesis:$STREAM" --envelope "${AWS[@]}" <"$WORK/headers.ndjson"
one_line "kproduce: error: <stdin>: line 2: "
assert_contains "$WORK/err" "headers"
# A tombstone (a null value), on line 3 of a file named on the command line.
printf '%s\n' '{"key":"bad-2","value":{"from":"refusals","n":0}}' \
  '{"key":"bad-2","value":{"from":"refusals","n":1}}' '{"key":"bad-2","value":null}' \
  '{"key":"bad-2","value":{"from":"refusals","n":3}}' >"$WORK/null.ndjson"
expect_exit 65 kproduce -t "kinesis:$STREAM" --envelope "${AWS[@]}" "$WORK/null.ndjson"
one_line "kproduce: error: $WORK/null.ndjson: line 3: "
assert_contains "$WORK/err" "null"
# What came before each refused line is in the stream, and nothing after.
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
assert_eq "$(jq -r 'select(.value.from == "refusals") | "\(.key):\(.value.n)"' "$WORK/out" | sort | paste -sd' ')" \
  "bad-1:0 bad-2:0 bad-2:1" "the records written before the refused lines"

# A stream has no consumer groups: a usage error (kpipe(7), EXIT STATUS:
# 2), said in one line, before the stream is asked anything.
expect_exit 2 kconsume -t "kinesis:$STREAM" -g grp -e "${AWS[@]}"
assert_empty "$WORK/out"
one_line "kconsume: error: -g: "

kinesis_api DeleteStream "$(stream_json)" >/dev/null
