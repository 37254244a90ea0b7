#!/usr/bin/env bash
# kconsume --efo CONSUMER (enhanced fan-out: SubscribeToShard over HTTP/2,
# kinesis-mock's plain port spoken to as h2c) against polling, on the
# fixture's kinesis-mock:
# (1) 2000 records kproduce wrote on 4 shards come out of
#     kconsume --efo C -e --from earliest each once, with its key and
#     value, in exactly the envelopes polling gives; the consumer is
#     registered the first time and reused the next; --efo with a Kafka
#     topic, or a name the service would refuse, is a usage error (2) of
#     one line;
# (2) a shard split while kconsume --efo reads: every record once, each
#     key's in the order written, the parent revoked before its children
#     are assigned;
# (3) kconsume --efo --state killed with SIGKILL after a complete
#     checkpoint, more records written, then run again to the end (-e):
#     it gives exactly the records after the checkpoint's sequence number
#     of each shard (its killed run's subscriptions still open at first).
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
N=2000 USERS=40
export BC_LINE_LENGTH=0

stream_json() { jq -nc --arg s "${1:-$STREAM}" '{StreamName: $s}'; }
arn() { kinesis_api DescribeStreamSummary "$(stream_json "$1")" | jq -r .StreamDescriptionSummary.StreamARN; }
consumers() { kinesis_api ListStreamConsumers "$(jq -nc --arg a "$(arn "$1")" '{StreamARN: $a}')" |
  jq -r '[.Consumers[] | "\(.ConsumerName) \(.ConsumerStatus)"] | sort | join(",")'; }
# The records of an output, each key's values numbered 0, 1, ... ("n"):
# the first out of its key's order, or "".
out_of_order() {
  jq -r 'select(has("$kpipe") | not) | "\(.key) \(.value.n)"' "$1" |
    awk '$2 != next_n[$1] + 0 && bad == "" { bad = $0 } { next_n[$1] = $2 + 1 } END { print bad }'
}

# --- usage errors -------------------------------------------------------------------
expect_exit 2 kconsume -t some-topic --efo c -e
assert_eq "$(cat "$WORK/err")" \
  "kconsume: error: --efo: enhanced fan-out is a Kinesis stream's: it needs -t kinesis:STREAM, not a Kafka topic" \
  "--efo with a Kafka topic"
assert_empty "$WORK/out"
expect_exit 2 kconsume -t "kinesis:$STREAM" --efo 'no spaces' -e "${AWS[@]}"
assert_eq "$(cat "$WORK/err")" \
  "kconsume: error: --efo 'no spaces': a consumer's name is 1 to 128 letters, digits, '_', '.' and '-'" \
  "--efo with a name the service refuses"

# --- (1) every record once, as polling gives it -------------------------------------
kinesis_stream "$STREAM" 4
jq -nc --argjson n "$N" --argjson u "$USERS" \
  'range($n) | {user: "user-\(. % $u)", n: ((. / $u) | floor), text: "record \(.) é"}' >"$WORK/input.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user "${AWS[@]}" "$WORK/input.ndjson"
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}"
mv "$WORK/out" "$WORK/polled.ndjson"
assert_eq "$(consumers "$STREAM")" "" "consumers before kconsume --efo"
expect_exit 0 kconsume -t "kinesis:$STREAM" --efo efo-test --from earliest -e "${AWS[@]}"
mv "$WORK/out" "$WORK/efo.ndjson"
assert_empty "$WORK/err"
assert_eq "$(lines "$WORK/efo.ndjson")" "$N" "records kconsume --efo read"
jq -c '{key: .user, value: .}' "$WORK/input.ndjson" | sort >"$WORK/want.kv"
jq -c '{key, value}' "$WORK/efo.ndjson" | sort >"$WORK/got.kv"
assert_files_equal "$WORK/got.kv" "$WORK/want.kv"
assert_eq "$(out_of_order "$WORK/efo.ndjson")" "" "the first record out of its key's order (key n)"
# The same envelopes as polling's, byte for byte (shard, sequence number,
# key, value, arrival time), each shard's in the same order.
jq -c -s 'sort_by(.partition) | .[]' "$WORK/polled.ndjson" >"$WORK/polled.sorted"
jq -c -s 'sort_by(.partition) | .[]' "$WORK/efo.ndjson" >"$WORK/efo.sorted"
assert_files_equal "$WORK/efo.sorted" "$WORK/polled.sorted"
# Registered, and left registered; a second run reuses it.
assert_eq "$(consumers "$STREAM")" "efo-test ACTIVE" "consumers after kconsume --efo"
expect_exit 0 kconsume -t "kinesis:$STREAM" --efo efo-test --from latest -e "${AWS[@]}"
assert_empty "$WORK/out"
assert_eq "$(consumers "$STREAM")" "efo-test ACTIVE" "consumers after a second run"

# --- (2) a split while kconsume --efo reads -----------------------------------------
SPLIT="$STREAM-split"
kinesis_stream "$SPLIT" 2
kconsume -t "kinesis:$SPLIT" --efo efo-split --from earliest --announce "${AWS[@]}" \
  >"$WORK/split.ndjson" 2>"$WORK/split.err" &
CONSUMER=$!
announced() { grep -qs '"event":"assigned"' "$WORK/split.ndjson"; }
wait_for "kconsume --efo to announce the shards" 30 announced
phase() {
  jq -nc --argjson p "$1" --argjson per 300 --argjson k "$USERS" \
    'range($p * $per; ($p + 1) * $per) | {user: "user-\(. % $k)", n: ((. / $k) | floor), phase: $p}' >"$WORK/phase.$1"
  kproduce -t "kinesis:$SPLIT" -k .user "${AWS[@]}" "$WORK/phase.$1" 2>"$WORK/produce.err" ||
    fail "kproduce of phase $1 failed: $(cat "$WORK/produce.err")"
}
records_out() { complete "$WORK/split.ndjson" | grep -c -v '^{"[$]kpipe"' || true; }
phase 0
wait_for "kconsume --efo to write phase 0" 60 eval '(($(records_out) >= 300))'
shards_json=$(kinesis_api ListShards "$(stream_json "$SPLIT")")
read -r shard start end < <(jq -r '.Shards[0] | "\(.ShardId) \(.HashKeyRange.StartingHashKey) \(.HashKeyRange.EndingHashKey)"' <<<"$shards_json")
middle=$(bc <<<"($start + $end + 1) / 2")
kinesis_api SplitShard "$(jq -nc --arg s "$SPLIT" --arg p "$shard" --arg k "$middle" \
  '{StreamName: $s, ShardToSplit: $p, NewStartingHashKey: $k}')" >/dev/null
wait_for "$SPLIT to be ACTIVE with 3 shards" 30 kinesis_is "$SPLIT" "ACTIVE 3"
phase 1
wait_for "kconsume --efo to write phases 0 and 1" 90 eval '(($(records_out) >= 600))'
# Its children are assigned once the parent is read to its end and
# revoked: the records after the split are in them.
children_assigned() { [[ $(jq -c 'select(."$kpipe" == "partitions" and .event == "assigned") | .partitions[].partition' "$WORK/split.ndjson" | wc -l) -ge 4 ]]; }
wait_for "kconsume --efo to assign the split's children" 60 children_assigned
kill -TERM "$CONSUMER"
consumer_status=0
wait "$CONSUMER" || consumer_status=$?
assert_eq "$consumer_status" 0 "kconsume --efo's exit status after SIGTERM"
if grep -E 'error|warning' "$WORK/split.err"; then fail "kconsume --efo complained: $(cat "$WORK/split.err")"; fi
cat "$WORK"/phase.* | jq -c '{key: .user, value: .}' | sort >"$WORK/split.want"
jq -c 'select(has("$kpipe") | not) | {key, value}' "$WORK/split.ndjson" | sort >"$WORK/split.got"
assert_files_equal "$WORK/split.got" "$WORK/split.want"
assert_eq "$(out_of_order "$WORK/split.ndjson")" "" "the first record out of its key's order across the split"
parent=$((10#${shard#shardId-}))
# "EVENT PARTITION LINE" for each partition a partitions line names.
jq -r '[input_line_number, .] | .[0] as $at | .[1] | select(."$kpipe" == "partitions") |
    "\(.event) \(.partitions[].partition) \($at)"' "$WORK/split.ndjson" >"$WORK/split.events"
revoked=$(awk -v p="$parent" '$1 == "revoked" && $2 == p { print $3 }' "$WORK/split.events")
assert_eq "$(awk '$1 == "revoked"' "$WORK/split.events" | wc -l)" 1 "partitions revoked (the parent alone)"
first_child=$(awk '$1 == "assigned" && $2 >= 2 { print $3; exit }' "$WORK/split.events")
[[ -n "$revoked" && -n "$first_child" && $revoked -lt $first_child ]] ||
  fail "a child assigned before its parent $parent was revoked: $(cat "$WORK/split.events")"
assert_eq "$(awk '$1 == "assigned" { print $2 }' "$WORK/split.events" | sort -n | paste -sd,)" "0,1,2,3" "partitions assigned"
# Phase 1 went to the children and the other shard alone.
assert_eq "$(jq -r 'select(.value.phase == 1) | .partition' "$WORK/split.ndjson" | grep -c -x "$parent" || true)" 0 \
  "phase 1's records read from the closed parent"

# --- (3) --state: killed, then resumed ----------------------------------------------
S=$(store efo)
cat >"$WORK/pipeline.sh" <<PIPE
#!/usr/bin/env bash
kconsume -t "kinesis:$STREAM" --efo efo-test --from earliest --state "$S" --checkpoint-interval 100ms \
    --endpoint "$KINESIS" --region us-east-1 "\$@" 2>>"$WORK/state.err" |
  kcheckpoint commit --state "$S" --passthrough 2>>"$WORK/state.err"
PIPE
run_pipeline >"$WORK/run1.ndjson"
complete_after_all() { (($(completed "$S") > 0)) && (($(grep -c -v '^{"[$]kpipe"' "$WORK/run1.ndjson") >= N)); }
wait_for "a complete checkpoint after the first run's records" 60 complete_after_all
kill -KILL -- "-$PIPELINE"
wait "$PIPELINE" 2>/dev/null || true
wait_for "the first run to end" 30 pipeline_gone
PIPELINE=""
sql --readonly "$S" "SELECT partition || ' ' || sequence FROM offsets ORDER BY partition" >"$WORK/stored"
assert_eq "$(cut -d' ' -f1 "$WORK/stored" | paste -sd,)" "0,1,2,3" "shards the checkpoint keeps"
# More records, written while no kconsume runs.
jq -nc --argjson n "$N" --argjson u "$USERS" \
  'range($n; $n + 500) | {user: "user-\(. % $u)", n: ((. / $u) | floor), text: "record \(.) é"}' >"$WORK/more.ndjson"
expect_exit 0 kproduce -t "kinesis:$STREAM" -k .user "${AWS[@]}" "$WORK/more.ndjson"
# What the second run must give: every record of the stream (read by
# polling) after its shard's stored sequence number (compared as numbers
# of up to 56 digits: by length, then digit by digit).
expect_exit 0 kconsume -t "kinesis:$STREAM" --from earliest -e "${AWS[@]}"
awk 'FILENAME == ARGV[1] { stored[$1] = $2 ""; next }
     { s = stored[$1]; q = $2 ""; if (length(q) > length(s) || (length(q) == length(s) && q > s)) print $3 }' \
  "$WORK/stored" <(jq -r '"\(.partition) \(.offset) \(.offset)"' "$WORK/out") | sort >"$WORK/rest.want"
(($(lines "$WORK/rest.want") >= 500)) || fail "only $(lines "$WORK/rest.want") records after the checkpoint"
setsid bash "$WORK/pipeline.sh" -e >"$WORK/run2.ndjson" || fail "the second run failed: $(cat "$WORK/state.err")"
jq -r 'select(has("$kpipe") | not) | .offset' "$WORK/run2.ndjson" | sort >"$WORK/rest.got"
assert_files_equal "$WORK/rest.got" "$WORK/rest.want"
if grep -E 'error|warning' "$WORK/state.err"; then fail "a stage complained: $(cat "$WORK/state.err")"; fi

# The consumers kconsume left registered go with their streams.
for s in "$SPLIT" "$STREAM"; do
  kinesis_api DeleteStream "$(jq -nc --arg s "$s" '{StreamName: $s, EnforceConsumerDeletion: true}')" >/dev/null
done
