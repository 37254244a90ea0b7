#!/usr/bin/env bash
# The local Kinesis that the Kinesis tests run against (scripts/kinesis,
# kinesis-mock), spoken to with curl's own SigV4 signing and nothing of
# kpipe's: a stream of 2 shards is created and becomes ACTIVE, 20 records
# put with partition keys each come back once, with their key, data, shard
# and sequence number, from reading every shard from TRIM_HORIZON; a split
# shard is closed, its last read names its children, and ListShards shows
# both children with the parent's id. What kinesis-mock answers and real
# Kinesis does not (explicit nulls, a placeholder EndingSequenceNumber) is
# tolerated here, not asserted.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
[[ $KINESIS == http://127.0.0.1:* ]] || fail "scripts/kinesis address printed '$KINESIS'"
STREAM="kpipe-$RUN_ID"
# The stream is the test's alone, but the service may be the fixture's:
# deleted when the test ends (a failed test keeps it, to look at).
kinesis_api CreateStream "$(jq -nc --arg s "$STREAM" '{StreamName: $s, ShardCount: 2}')" >/dev/null

# status: the stream's StreamStatus and its open shards, "ACTIVE 2".
status() {
  kinesis_api DescribeStreamSummary "$(jq -nc --arg s "$STREAM" '{StreamName: $s}')" |
    jq -r '.StreamDescriptionSummary | "\(.StreamStatus) \(.OpenShardCount)"'
}
is_status() { [[ $(status) == "$1" ]]; }
wait_for "$STREAM to be ACTIVE with 2 shards" 30 is_status "ACTIVE 2"

shards() { kinesis_api ListShards "$(jq -nc --arg s "$STREAM" '{StreamName: $s}')" >"$WORK/shards.json"; }
shards
jq -r '.Shards[].ShardId' "$WORK/shards.json" | sort >"$WORK/shard_ids"
assert_eq "$(lines "$WORK/shard_ids")" 2 "shards of a new stream"

# 20 records, each key its own; the data is JSON text with a non-ASCII
# character, so that base64 carries bytes, not only ASCII.
jq -nc '[range(20) | {key: "user-\(.)", data: ({n: ., text: "record \(.) é"} | tojson)}]' >"$WORK/want.json"
jq -c --arg s "$STREAM" '{StreamName: $s, Records: [.[] | {PartitionKey: .key, Data: (.data | @base64)}]}' \
  "$WORK/want.json" >"$WORK/put.json"
kinesis_api PutRecords "$(cat "$WORK/put.json")" >"$WORK/put.answer"
assert_eq "$(jq '.FailedRecordCount' "$WORK/put.answer")" 0 "PutRecords' FailedRecordCount"
assert_eq "$(jq '[.Records[] | select(.SequenceNumber != null and .ErrorCode == null)] | length' "$WORK/put.answer")" 20 \
  "records PutRecords stored"
# What each record should come back as: key, data, and where PutRecords
# put it (its answers are in the order of the records sent).
jq -c --slurpfile put "$WORK/put.answer" \
  '[., $put[0].Records] | transpose | map({key: .[0].key, data: .[0].data, shard: .[1].ShardId, seq: .[1].SequenceNumber}) | sort_by(.key) | .[]' \
  "$WORK/want.json" >"$WORK/want"
# Both shards take some: the keys' MD5 hashes fall on both halves.
assert_eq "$(jq -r .shard "$WORK/want" | sort -u)" "$(cat "$WORK/shard_ids")" "shards written"

# Every shard from TRIM_HORIZON, until each is read to its end
# (MillisBehindLatest 0 and nothing more) and every record is back.
declare -A iterator caught_up
mapfile -t shard_ids <"$WORK/shard_ids"
for shard in "${shard_ids[@]}"; do
  iterator[$shard]=$(kinesis_api GetShardIterator "$(jq -nc --arg s "$STREAM" --arg id "$shard" \
    '{StreamName: $s, ShardId: $id, ShardIteratorType: "TRIM_HORIZON"}')" | jq -r .ShardIterator)
  caught_up[$shard]=false
done
: >"$WORK/got"
all_read() {
  local shard n
  for shard in "${!iterator[@]}"; do
    ${caught_up[$shard]} && continue
    kinesis_api GetRecords "$(jq -nc --arg i "${iterator[$shard]}" '{ShardIterator: $i, Limit: 7}')" >"$WORK/get.answer"
    jq -c --arg shard "$shard" \
      '.Records[] | {key: .PartitionKey, data: (.Data | @base64d), shard: $shard, seq: .SequenceNumber}' \
      "$WORK/get.answer" >>"$WORK/got"
    n=$(jq '.Records | length' "$WORK/get.answer")
    iterator[$shard]=$(jq -r .NextShardIterator "$WORK/get.answer")
    [[ "${iterator[$shard]}" != null ]] || fail "$shard, open, has no NextShardIterator: $(head -c 500 "$WORK/get.answer")"
    ((n == 0)) && [[ $(jq .MillisBehindLatest "$WORK/get.answer") == 0 ]] && caught_up[$shard]=true
  done
  for shard in "${!caught_up[@]}"; do ${caught_up[$shard]} || return 1; done
  (($(lines "$WORK/got") >= 20))
}
wait_for "every shard read to its end" 30 all_read
jq -c -s 'sort_by(.key) | .[]' "$WORK/got" >"$WORK/got.sorted"
assert_files_equal "$WORK/got.sorted" "$WORK/want"

# Resharding: the first shard split at the middle of its hash range. A
# stream's shards share the 128-bit hash space evenly: the first of two
# covers 0 to 2^127 - 2 (as Kinesis makes them), so its middle is fixed.
PARENT=shardId-000000000000
assert_eq "$(jq -r --arg p "$PARENT" '.Shards[] | select(.ShardId == $p) | .HashKeyRange | "\(.StartingHashKey) \(.EndingHashKey)"' \
  "$WORK/shards.json")" "0 170141183460469231731687303715884105726" "$PARENT's hash range"
SPLIT=85070591730234615865843651857942052863 BEFORE_SPLIT=85070591730234615865843651857942052862
kinesis_api SplitShard "$(jq -nc --arg s "$STREAM" --arg p "$PARENT" --arg k "$SPLIT" \
  '{StreamName: $s, ShardToSplit: $p, NewStartingHashKey: $k}')" >/dev/null
wait_for "$STREAM to be ACTIVE with 3 open shards after the split" 30 is_status "ACTIVE 3"
shards
# The parent is closed (an EndingSequenceNumber: kinesis-mock's is a
# placeholder, not the last record's, so only its presence is checked),
# the other shard is still open, and the two children cover the parent's
# range from the split point, each naming the parent.
jq -c --arg p "$PARENT" '.Shards | map({id: .ShardId, parent: .ParentShardId,
    closed: (.SequenceNumberRange.EndingSequenceNumber != null),
    range: "\(.HashKeyRange.StartingHashKey)-\(.HashKeyRange.EndingHashKey)"}) | sort_by(.id) | .[]' \
  "$WORK/shards.json" >"$WORK/after_split"
cat >"$WORK/after_split.want" <<EOF
{"id":"shardId-000000000000","parent":null,"closed":true,"range":"0-170141183460469231731687303715884105726"}
{"id":"shardId-000000000001","parent":null,"closed":false,"range":"170141183460469231731687303715884105727-340282366920938463463374607431768211455"}
{"id":"shardId-000000000002","parent":"shardId-000000000000","closed":false,"range":"0-$BEFORE_SPLIT"}
{"id":"shardId-000000000003","parent":"shardId-000000000000","closed":false,"range":"$SPLIT-170141183460469231731687303715884105726"}
EOF
assert_files_equal "$WORK/after_split" "$WORK/after_split.want"
# Reading on from where the parent was left: its end, with no next
# iterator and its children named (GetRecords' ChildShards).
kinesis_api GetRecords "$(jq -nc --arg i "${iterator[$PARENT]}" '{ShardIterator: $i}')" >"$WORK/get.answer"
assert_eq "$(jq -c '[(.Records | length), .NextShardIterator, ([(.ChildShards // [])[].ShardId] | sort)]' "$WORK/get.answer")" \
  '[0,null,["shardId-000000000002","shardId-000000000003"]]' "the parent's last GetRecords"

kinesis_api DeleteStream "$(jq -nc --arg s "$STREAM" '{StreamName: $s}')" >/dev/null
