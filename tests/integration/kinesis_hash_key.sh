#!/usr/bin/env bash
# kproduce --explicit-hash-key on a Kinesis stream of 4 shards
# (kinesis-mock, the fixture's): records that all share one partition key,
# each with a hash key from a field (the first, the last and a middle value
# of each shard's HashKeyRange, as ListShards gives them; as a JSON string
# of digits, or as a number, 39 digits beyond any double included), land
# in the shard whose range holds their hash key, as kconsume names the
# shard in the envelope; without the option, they all land in one. With
# --envelope, the path is of the envelope line.
# A hash key missing, not an integer, or beyond 2^128-1 is the line's
# fault: exit 65 with one line naming the input and the line, after the
# lines before it were written; with --dlq, a dead letter each, and the
# good lines written.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env

stream_json() { jq -nc --arg s "$STREAM" '{StreamName: $s}'; }
kinesis_stream "$STREAM" 4

# Each shard's number and its range, "0 START END", as the service says.
kinesis_api ListShards "$(stream_json)" |
  jq -r '.Shards[] | "\(.ShardId | ltrimstr("shardId-") | tonumber) \(.HashKeyRange.StartingHashKey) \(.HashKeyRange.EndingHashKey)"' \
    >"$WORK/ranges"
assert_eq "$(lines "$WORK/ranges")" 4 "shards listed"
assert_eq "$(awk '$2 == "0"' "$WORK/ranges" | wc -l)" 1 "shards starting at hash key 0"
assert_eq "$(awk '$3 == "340282366920938463463374607431768211455"' "$WORK/ranges" | wc -l)" 1 \
  "shards ending at 2^128-1"

# half START END: (START + END) / 2, exactly (bc keeps every digit).
half() { BC_LINE_LENGTH=0 bc <<<"($1 + $2) / 2"; }

# The input: each shard's first, middle and last hash key, the first as a
# string, the middle as a string with leading zeros, the last as a JSON
# number; every line with the same partition key. "want" is the shard.
while read -r shard start end; do
  printf '{"pk":"one-key","run":"hashed","want":%s,"at":"start","h":"%s"}\n' "$shard" "$start"
  printf '{"pk":"one-key","run":"hashed","want":%s,"at":"middle","h":"000%s"}\n' "$shard" "$(half "$start" "$end")"
  printf '{"pk":"one-key","run":"hashed","want":%s,"at":"end","h":%s}\n' "$shard" "$end"
done <"$WORK/ranges" >"$WORK/input.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .pk --explicit-hash-key .h "${AWS[@]}" "$WORK/input.ndjson"
assert_empty "$WORK/out"
assert_empty "$WORK/err"
# The same lines without the option: one partition key, one shard.
sed 's/"hashed"/"plain"/' "$WORK/input.ndjson" >"$WORK/plain.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .pk "${AWS[@]}" "$WORK/plain.ndjson"

expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
mv "$WORK/out" "$WORK/got.ndjson"
assert_empty "$WORK/err"
assert_eq "$(lines "$WORK/got.ndjson")" 24 "records kconsume read"
# Each record's key is its partition key, whatever placed it.
assert_eq "$(jq -r .key "$WORK/got.ndjson" | sort -u)" "one-key" "the records' keys"
# Hashed: each once, in the shard whose range holds its hash key.
jq -r 'select(.value.run == "hashed") | "\(.value.want) \(.value.at) \(.partition)"' "$WORK/got.ndjson" |
  sort >"$WORK/placed"
awk '{ for (i = 0; i < 3; i++) print $1, (i == 0 ? "end" : i == 1 ? "middle" : "start"), $1 }' "$WORK/ranges" |
  sort >"$WORK/want_placed"
assert_files_equal "$WORK/placed" "$WORK/want_placed"
# Unhashed: all 12 in the one shard their partition key hashes to.
assert_eq "$(jq -r 'select(.value.run == "plain") | .partition' "$WORK/got.ndjson" | sort -u | wc -l)" 1 \
  "shards the records without hash keys went to"

# With --envelope, the path is of the envelope line: hash key 0 is in the
# shard whose range starts at 0, 2^128-1 in the one whose range ends there.
first=$(awk '$2 == "0" { print $1 }' "$WORK/ranges")
last=$(awk '$3 == "340282366920938463463374607431768211455" { print $1 }' "$WORK/ranges")
printf '%s\n' '{"key":"env","value":{"n":0,"h":"0"}}' \
  '{"key":"env","value":{"n":1,"h":340282366920938463463374607431768211455}}' >"$WORK/env.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" --envelope --explicit-hash-key .value.h "${AWS[@]}" "$WORK/env.ndjson"
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
assert_eq "$(jq -r 'select(.key == "env") | "\(.value.n):\(.partition)"' "$WORK/out" | sort | paste -sd' ')" \
  "0:$first 1:$last" "the envelopes' shards (n:shard)"

# --- a hash key the line cannot give ---------------------------------------------
# one_line TEXT: the diagnostic is a single line, and holds TEXT.
one_line() {
  assert_eq "$(lines "$WORK/err")" 1 "lines of the diagnostic ($(cat "$WORK/err"))"
  assert_contains "$WORK/err" "$1"
}
refused() {
  printf '%s\n' '{"pk":"bad","n":0,"h":"7"}' "$1" '{"pk":"bad","n":2,"h":"7"}' >"$WORK/bad.ndjson"
  expect_exit 65 kproduce -t "kinesis:$STREAM" -k .pk --explicit-hash-key .h "${AWS[@]}" "$WORK/bad.ndjson"
  assert_empty "$WORK/out"
  one_line "kproduce: error: $WORK/bad.ndjson: line 2: $2"
}
refused '{"pk":"bad","n":1}' "field '.h' is missing"
refused '{"pk":"bad","n":1,"h":"12a"}' "field '.h': '12a' is not a decimal integer from 0 to 2^128-1"
refused '{"pk":"bad","n":1,"h":-1}' "field '.h': -1 is not a decimal integer from 0 to 2^128-1"
refused '{"pk":"bad","n":1,"h":1.5}' "field '.h': 1.5 is not a decimal integer from 0 to 2^128-1"
refused '{"pk":"bad","n":1,"h":true}' "field '.h': true is not a decimal integer from 0 to 2^128-1"
refused '{"pk":"bad","n":1,"h":"340282366920938463463374607431768211456"}' \
  "field '.h': '340282366920938463463374607431768211456' is not a decimal integer from 0 to 2^128-1"
# Each run wrote its first line, and nothing after the refused one.
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
assert_eq "$(jq -r 'select(.key == "bad") | .value.n' "$WORK/out" | sort | uniq -c | awk '{print $2 "x" $1}' | paste -sd' ')" \
  "0x6" "the bad runs' records"

# With --dlq, the refused lines are dead letters, and the others written.
DLQ=$(store dlq)
printf '%s\n' '{"pk":"dlq","n":0,"h":"7"}' '{"pk":"dlq","n":1}' '{"pk":"dlq","n":2,"h":"x"}' \
  '{"pk":"dlq","n":3,"h":1e3}' >"$WORK/dlq.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .pk --explicit-hash-key .h --dlq "$DLQ" "${AWS[@]}" -q "$WORK/dlq.ndjson"
assert_empty "$WORK/err"
assert_eq "$(sql "$DLQ" "SELECT reason FROM dead_letters ORDER BY id")" \
  "line 2: field '.h' is missing
line 3: field '.h': 'x' is not a decimal integer from 0 to 2^128-1" "the dead letters"
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}" -q
assert_eq "$(jq -r 'select(.key == "dlq") | .value.n' "$WORK/out" | sort | paste -sd' ')" "0 3" \
  "the records written with --dlq"

kinesis_api DeleteStream "$(stream_json)" >/dev/null
