#!/usr/bin/env bash
# Resharding under a running kconsume (--announce, no -e): records go into
# a stream of 2 shards in six phases, and between them one shard is split
# (SplitShard) while kconsume reads, then two adjacent ones merged
# (MergeShards) and the stream scaled to twice its open shards
# (UpdateShardCount, UNIFORM_SCALING) while kconsume is stopped (SIGSTOP),
# so that it goes on with parents holding records it has not read and
# children holding records already. Once every record is out, kconsume is
# stopped (SIGTERM). Every record comes out once, and each partition key's
# records in the order written: a child shard is read only after its
# parents. Each child is announced once as an assigned partition, after
# its parents were revoked and before its first record; each closed shard
# is revoked once, after its last record.
source "$(dirname "$0")/lib.sh"
KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
kinesis_client_env
PHASES=6 PER_PHASE=250 KEYS=40
N=$((PHASES * PER_PHASE))
# Hash keys are 128-bit integers: bc computes with them.
export BC_LINE_LENGTH=0

stream_json() { jq -nc --arg s "$STREAM" '{StreamName: $s}'; }
status() { kinesis_api DescribeStreamSummary "$(stream_json)" |
  jq -r '.StreamDescriptionSummary | "\(.StreamStatus) \(.OpenShardCount)"'; }
is_status() { [[ $(status) == "$1" ]]; }
list_shards() { kinesis_api ListShards "$(stream_json)" >"$WORK/shards.json"; }
# open_shards: "ID START END" for each open shard, by their hash ranges.
open_shards() {
  list_shards
  jq -r '.Shards[] | select(.SequenceNumberRange.EndingSequenceNumber == null) | .HashKeyRange as $h |
      "\($h.StartingHashKey | length) \($h.StartingHashKey) \(.ShardId) \($h.EndingHashKey)"' "$WORK/shards.json" |
    sort -k1,1n -k2,2 | awk '{ print $3, $2, $4 }'
}

kinesis_api CreateStream "$(jq -nc --arg s "$STREAM" '{StreamName: $s, ShardCount: 2}')" >/dev/null
wait_for "$STREAM to be ACTIVE with 2 shards" 30 is_status "ACTIVE 2"

# kconsume, in the background: its output is what the test reads.
kconsume -t "kinesis:$STREAM" --from earliest --announce "${AWS[@]}" >"$WORK/out.ndjson" 2>"$WORK/consume.err" &
CONSUMER=$!
# A kconsume left stopped would never take the SIGTERM of cleanup's.
continue_then_cleanup() {
  local status=$?
  kill -CONT "$CONSUMER" 2>/dev/null || true
  (exit "$status")
  cleanup
}
trap continue_then_cleanup EXIT
# It has listed the stream's shards once it announces them: every shard
# made from now on is one it finds while it runs.
announced() { grep -q '"event":"assigned"' "$WORK/out.ndjson"; }
wait_for "kconsume to announce the shards" 30 announced
assert_eq "$(jq -c 'select(."$kpipe" == "partitions") | [.event, [.partitions[].partition]]' "$WORK/out.ndjson")" \
  '["assigned",[0,1]]' "kconsume's first partitions line"

# phase P: PER_PHASE records, each key's numbered on from the last phase
# ("n"), through kproduce.
phase() {
  jq -nc --argjson p "$1" --argjson per "$PER_PHASE" --argjson k "$KEYS" \
    'range($p * $per; ($p + 1) * $per) | {key: "user-\(. % $k)", n: ((. / $k) | floor), phase: $p}' >"$WORK/phase.$1"
  kproduce -t "kinesis:$STREAM" -k .key "${AWS[@]}" "$WORK/phase.$1" 2>"$WORK/produce.err" ||
    fail "kproduce of phase $1 failed: $(cat "$WORK/produce.err")"
}

# Phase 0, then the first open shard split in the middle of its hash
# range, and phase 1, while kconsume reads.
phase 0
read -r shard start end < <(open_shards)
middle=$(bc <<<"($start + $end + 1) / 2")
kinesis_api SplitShard "$(jq -nc --arg s "$STREAM" --arg p "$shard" --arg k "$middle" \
  '{StreamName: $s, ShardToSplit: $p, NewStartingHashKey: $k}')" >/dev/null
wait_for "$STREAM to be ACTIVE with 3 shards after splitting $shard" 30 is_status "ACTIVE 3"
phase 1

# The merge and the scaling happen while kconsume is stopped (SIGSTOP),
# between two phases, so that it goes on with parents whose records it
# has not read and children that hold records already: only reading
# every parent to its end first keeps each key's records in order.
kill -STOP "$CONSUMER"
# Phase 2, then the last two adjacent open shards (by hash range) merged:
# after the split, one child and the other original shard, so that the
# merged shard has two parents of different generations; phase 3.
phase 2
mapfile -t open < <(open_shards)
merge=()
for ((i = ${#open[@]} - 1; i > 0; i--)); do
  read -r low _ low_end <<<"${open[i - 1]}"
  read -r high high_start _ <<<"${open[i]}"
  if [[ $(bc <<<"$low_end + 1 == $high_start") == 1 ]]; then
    merge=("$low" "$high")
    break
  fi
done
((${#merge[@]} == 2)) || fail "no two adjacent open shards: ${open[*]}"
kinesis_api MergeShards "$(jq -nc --arg s "$STREAM" --arg a "${merge[0]}" --arg b "${merge[1]}" \
  '{StreamName: $s, ShardToMerge: $a, AdjacentShardToMerge: $b}')" >/dev/null
wait_for "$STREAM to be ACTIVE with 2 shards after merging ${merge[*]}" 30 is_status "ACTIVE 2"
phase 3
kill -CONT "$CONSUMER"

# Phase 4, then twice the open shards, then phase 5, kconsume stopped again.
kill -STOP "$CONSUMER"
phase 4
kinesis_api UpdateShardCount "$(jq -nc --arg s "$STREAM" \
  '{StreamName: $s, TargetShardCount: 4, ScalingType: "UNIFORM_SCALING"}')" >/dev/null
wait_for "$STREAM to be ACTIVE with 4 shards after UpdateShardCount" 30 is_status "ACTIVE 4"
phase 5
kill -CONT "$CONSUMER"

records() { complete "$WORK/out.ndjson" | grep -c -v '^{"[$]kpipe"'; }
all_out() { (($(records) >= N)); }
wait_for "kconsume to write all $N records" 90 all_out
kill -TERM "$CONSUMER"
consumer_status=0
wait "$CONSUMER" || consumer_status=$?
assert_eq "$consumer_status" 0 "kconsume's exit status after SIGTERM"
# Its last line is whole, and nothing it said was an error or a warning.
[[ $(tail -c 1 "$WORK/out.ndjson" | od -An -tx1 | tr -d ' ') == 0a ]] || fail "kconsume's last line is incomplete"
if grep -E 'error|warning' "$WORK/consume.err"; then fail "kconsume complained: $(cat "$WORK/consume.err")"; fi

# --- the records: each once, each key's in the order written ----------------------
cat "$WORK"/phase.* | jq -c '{key: .key, value: .}' | sort >"$WORK/want.kv"
jq -c 'select(has("$kpipe") | not) | {key, value}' "$WORK/out.ndjson" | sort >"$WORK/got.kv"
assert_eq "$(lines "$WORK/got.kv")" "$N" "records kconsume wrote"
assert_files_equal "$WORK/got.kv" "$WORK/want.kv"
out_of_order=$(jq -r 'select(has("$kpipe") | not) | "\(.key) \(.value.n) \(.partition) \(.offset)"' "$WORK/out.ndjson" |
  awk '$2 != next_n[$1] + 0 && bad == "" { bad = $0 } { next_n[$1] = $2 + 1 } END { print bad }')
assert_eq "$out_of_order" "" "the first record out of its key's order (key n partition sequence)"

# --- the shards: children announced, closed shards revoked, in order --------------
list_shards
# "PARTITION PARENT ADJACENT-PARENT CLOSED" for each shard (- for no parent).
jq -r 'def n: if . == null then "-" else ltrimstr("shardId-") | tonumber end;
    .Shards[] | "\(.ShardId | n) \(.ParentShardId | n) \(.AdjacentParentShardId | n)"
      + " \(.SequenceNumberRange.EndingSequenceNumber != null)"' "$WORK/shards.json" >"$WORK/lineage"
# Two, a split's two, a merge's one and UpdateShardCount's (at least two).
(($(lines "$WORK/lineage") >= 7)) || fail "the stream has only these shards: $(cat "$WORK/lineage")"
# Where each event happened, by line of the output: "assigned P LINE",
# "revoked P LINE", "first P LINE", "last P LINE" (a partition's first and
# last record).
jq -r '[input_line_number, .] | .[0] as $at | .[1] |
    if has("$kpipe") then select(."$kpipe" == "partitions") | "\(.event) \(.partitions[].partition) \($at)"
    else "record \(.partition) \($at)" end' "$WORK/out.ndjson" |
  awk '$1 == "record" { if (!($2 in first)) first[$2] = $3; last[$2] = $3; next } { print }
       END { for (p in first) print "first", p, first[p]; for (p in last) print "last", p, last[p] }' >"$WORK/events"
at() { awk -v e="$1" -v p="$2" '$1 == e && $2 == p { print $3 }' "$WORK/events"; }
while read -r p parent adjacent closed; do
  assigned=$(at assigned "$p") revoked=$(at revoked "$p")
  assert_eq "$(wc -w <<<"$assigned")" 1 "partitions lines assigning $p"
  if [[ $closed == true ]]; then
    assert_eq "$(wc -w <<<"$revoked")" 1 "partitions lines revoking $p, closed"
    last=$(at last "$p")
    [[ -z "$last" || $last -lt $revoked ]] || fail "$p revoked at line $revoked, before its record at line $last"
  else
    assert_eq "$revoked" "" "lines revoking $p, open"
  fi
  first=$(at first "$p")
  [[ -z "$first" || $first -gt $assigned ]] || fail "$p's first record at line $first, before it was assigned at line $assigned"
  for q in $parent $adjacent; do
    [[ $q != - ]] || continue
    parent_revoked=$(at revoked "$q")
    [[ -n "$parent_revoked" && $parent_revoked -lt $assigned ]] ||
      fail "$p assigned at line $assigned, before its parent $q was revoked (at line ${parent_revoked:-none})"
  done
done <"$WORK/lineage"
# Every shard gave records (the phases' keys fall on all of them), so that
# each was truly read after its parents, not found empty.
assert_eq "$(awk '$1 == "first"' "$WORK/events" | wc -l)" "$(lines "$WORK/lineage")" "shards that gave records"

kinesis_api DeleteStream "$(stream_json)" >/dev/null
