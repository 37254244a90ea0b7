#!/usr/bin/env bash
# kjoin --table kinesis:S (kjoin(1), Tables): a Kinesis stream (kinesis-mock,
# the fixture's) read as a table, each record's partition key its key and
# the newest value winning, read to its end (every shard at its tip) before
# the first stream record is joined. As of the events' time, versions come
# from every shard, those written after a split from the children too, and
# the closed parent, read to its end, holds the table's watermark back no
# longer: every event is joined with the version that held at its time, and
# kjoin ends.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
kinesis_client_env
export AWS_ENDPOINT_URL_KINESIS=$KINESIS
USERS=20

stream_json() { jq -nc --arg s "$1" '{StreamName: $s}'; }
users() { jq -nc --argjson u "$USERS" 'range($u) | "u\(.)"'; }

# --- lookup: the newest value of each key ---------------------------------------------
LOOKUP="kpipe-$RUN_ID-lookup"
kinesis_stream "$LOOKUP" 2
users | jq -c '{user_id: ., name: "old \(.)"}' >"$WORK/rows.ndjson"
users | jq -c '{user_id: ., name: "name of \(.)"}' >>"$WORK/rows.ndjson"
expect_exit 0 kproduce -t "kinesis:$LOOKUP" -k .user_id "$WORK/rows.ndjson"
jq -nc --argjson u "$USERS" 'range(100) | {user_id: "u\(. % $u)", n: .}' >"$WORK/events.ndjson"
expect_exit 0 kjoin --table "kinesis:$LOOKUP" -k .user_id --as .user "$WORK/events.ndjson"
assert_eq "$(lines "$WORK/out")" 100 "events joined"
assert_eq "$(jq -c 'select(.user.name != "name of \(.user_id)")' "$WORK/out" | head -3)" "" "events joined with another row than their user's newest"
assert_eq "$(jq -c '[.user_id, .n]' "$WORK/out" | paste -sd' ')" "$(jq -c '[.user_id, .n]' "$WORK/events.ndjson" | paste -sd' ')" "events in their order"

# --- as of, across a split ------------------------------------------------------------
ASOF="kpipe-$RUN_ID-asof"
kinesis_stream "$ASOF" 2
# User U's version V holds from time 1000 * V.
versions() { users | jq -c --argjson v "$1" '{user_id: ., v: $v, since: (1000 * $v)}'; }
versions 0 >"$WORK/v0.ndjson"
versions 1 >>"$WORK/v0.ndjson"
expect_exit 0 kproduce -t "kinesis:$ASOF" -k .user_id "$WORK/v0.ndjson"
# The first shard split in the middle of its hash range: its versions 0 and
# 1 are in the parent, 2 and 3 in the children.
kinesis_api ListShards "$(stream_json "$ASOF")" >"$WORK/shards.json"
read -r shard start end < <(jq -r '.Shards[0] | "\(.ShardId) \(.HashKeyRange.StartingHashKey) \(.HashKeyRange.EndingHashKey)"' "$WORK/shards.json")
middle=$(bc <<<"($start + $end + 1) / 2")
kinesis_api SplitShard "$(jq -nc --arg s "$ASOF" --arg p "$shard" --arg k "$middle" \
  '{StreamName: $s, ShardToSplit: $p, NewStartingHashKey: $k}')" >/dev/null
wait_for "$ASOF to be ACTIVE with 3 shards after the split" 30 kinesis_is "$ASOF" "ACTIVE 3"
{ versions 2; versions 3; } >"$WORK/v1.ndjson"
# A key on each open shard far in the future: the table's watermark passes
# every event once the shards are read.
jq -nc 'range(40) | {user_id: "end\(.)", v: -1, since: 1e12}' >>"$WORK/v1.ndjson"
expect_exit 0 kproduce -t "kinesis:$ASOF" -k .user_id "$WORK/v1.ndjson"
# Events at 0.5 s, 1.5 s, ... 3.5 s for each user: version floor(ts / 1000).
jq -nc --argjson u "$USERS" 'range(4 * $u) | {user_id: "u\(. % $u)", ts: (500 + 1000 * ((. / $u) | floor))}' >"$WORK/asof.ndjson"
# The events' input stays open until every event is out: the closed parent
# must not hold the watermark (the end of input would join what waits
# with the table as it is, and hide it).
mkfifo "$WORK/asof.in"
kjoin --table "kinesis:$ASOF" -k .user_id --as .user --as-of .ts --table-time .value.since \
  <"$WORK/asof.in" >"$WORK/asof.out" 2>"$WORK/asof.err" &
JOIN=$!
exec 3>"$WORK/asof.in"
cat "$WORK/asof.ndjson" >&3
all_joined() { (($(lines "$WORK/asof.out") == 4 * USERS)); }
wait_for "every event joined while the input is open" 30 all_joined
exec 3>&-
wait "$JOIN" || fail "kjoin failed: $(cat "$WORK/asof.err")"
wrong=$(jq -c 'select(.user.v != ((.ts / 1000) | floor)) | [.user_id, .ts, .user.v]' "$WORK/asof.out" | head -3)
assert_eq "$wrong" "" "events joined with another version than the one that held at their time"
# Versions 2 and 3 of the users on the split shard came from its children.
assert_eq "$(kinesis_api ListShards "$(stream_json "$ASOF")" | jq -r '.Shards | length')" 4 "shards of $ASOF (2, one split in 2)"
! grep -q 'error' "$WORK/asof.err" || fail "kjoin said: $(cat "$WORK/asof.err")"
