#!/usr/bin/env bash
# kconsume --until: each partition ends before an offset, or before its
# first record at or after a time, so that --from @A --until @B is [A, B)
# on every partition; kconsume exits once every partition is at its end,
# without -e; a group, and a pipeline's checkpoints, go on from where
# --until stopped them, and nothing past the end is written.
source "$(dirname "$0")/lib.sh"
start_broker ts:2 off:2
TS=$(topic ts)
OFF=$(topic off)

# A run that does not end by itself fails the test instead of hanging it.
consume() { expect_exit 0 timeout 60 kconsume -b "$BROKERS" "$@"; }
# [partition, offset] of what kconsume wrote, sorted.
positions() { jq -c '[.partition, .offset]' "$WORK/out" | sort | tr '\n' ' '; }

# 20 records one second apart, alternating between the 2 partitions: record
# i is stamped base + i seconds, on partition i % 2.
base=1764412345000 # 2025-11-29T10:32:25Z
for i in $(seq 0 19); do
  echo "{\"partition\":$((i % 2)),\"timestamp\":$((base + i * 1000)),\"key\":\"k$i\",\"value\":{\"i\":$i}}"
done | kproduce -b "$BROKERS" -t "$TS" --envelope --keep-partition
# The records of [A, B) on each partition, as "partition:i ...".
expected() {
  local p i
  for p in 0 1; do
    for ((i = p; i < 20; i += 2)); do (($1 <= i && i < $2)) && printf '%d:%d ' "$p" "$i"; done
  done
}
got() { jq -r '"\(.partition):\(.value.i)"' "$WORK/out" | sort -t: -k1,1n -k2,2n | tr '\n' ' '; }

# [base + 5 s, base + 13 s): records 5 to 12, 4 on each partition.
consume -t "$TS" --from "@$((base + 5000))" --until "@$((base + 13000))"
assert_eq "$(got)" "$(expected 5 13)" "--from @A --until @B (epoch ms)"
consume -t "$TS" --from @2025-11-29T10:32:30Z --until @2025-11-29T11:32:38+01:00
assert_eq "$(got)" "$(expected 5 13)" "--from @A --until @B (RFC 3339)"
# Between two records' times: B is exclusive of the record at B only.
consume -t "$TS" --from "@$((base + 4500))" --until "@$((base + 12500))"
assert_eq "$(got)" "$(expected 5 13)" "--from @A --until @B between records"
# No record at or after B: each partition ends where it ended when
# kconsume started, still without -e.
consume -t "$TS" --from "@$((base + 16000))" --until @2099-01-01T00:00:00Z
assert_eq "$(got)" "$(expected 16 20)" "--until a time past every record"
# A before B's records and after: nothing, at once.
consume -t "$TS" --until "@$base"
assert_empty "$WORK/out"
consume -t "$TS" --from "@$((base + 13000))" --until "@$((base + 5000))"
assert_empty "$WORK/out"
# With -e, whichever end comes first: records 16 to 19 are offsets 8 and 9.
consume -t "$TS" -e --from "@$((base + 16000))" --until 12
assert_eq "$(got)" "$(expected 16 20)" "-e before --until"
consume -t "$TS" -e --from "@$((base + 16000))" --until 9
assert_eq "$(got)" "$(expected 16 18)" "--until before -e"
# The value of --until is checked before any broker is asked.
expect_exit 2 kconsume -b "$BROKERS" -t "$TS" --until=-5
assert_eq "$(cat "$WORK/err")" "kconsume: error: --until '-5': expected an offset or @TIME"

# 10 records on each of 2 partitions.
for p in 0 1; do
  for i in $(seq 0 9); do echo "{\"p\":$p,\"i\":$i}"; done | kproduce -b "$BROKERS" -t "$OFF" -p "$p"
done
# "[p,o] ..." for offsets FROM to TO - 1 of both partitions.
offsets() { for p in 0 1; do for ((o = $1; o < $2; o++)); do printf '[%d,%d] ' "$p" "$o"; done; done; }

consume -t "$OFF" --until 5
assert_eq "$(positions)" "$(offsets 0 5)" "--until 5 without -e"
consume -t "$OFF" --until 0
assert_empty "$WORK/out"

# A group commits the end: the next run goes on from there.
G=$(group until)
consume -t "$OFF" -g "$G" --until 5
assert_eq "$(positions)" "$(offsets 0 5)" "-g --until 5"
consume -t "$OFF" -g "$G" --until 8
assert_eq "$(positions)" "$(offsets 5 8)" "-g --until 8 goes on from 5"
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  assert_eq "$(describe_group "$G" | awk '{print $2, $3}' | tr '\n' ' ')" "0 8 1 8 " "the group's offsets"
fi
consume -t "$OFF" -g "$G" -e
assert_eq "$(positions)" "$(offsets 8 10)" "-g -e after --until 8"

# A pipeline's checkpoints hold the end too, and it resumes there.
S=$(store s)
pipeline() {
  timeout 60 kconsume -b "$BROKERS" -t "$OFF" --state "$S" --until "$1" 2>"$WORK/kerr" |
    kcheckpoint commit --state "$S" --passthrough >"$WORK/lines" 2>"$WORK/err" ||
    fail "pipeline --until $1: $(cat "$WORK/kerr" "$WORK/err")"
  grep -v '"\$kpipe"' "$WORK/lines" >"$WORK/out" || true
}
pipeline 3
assert_eq "$(positions)" "$(offsets 0 3)" "--state --until 3"
assert_eq "$(kcheckpoint export --state "$S" | jq -c '[.partition, .offset]' | sort | tr '\n' ' ')" \
  "[0,3] [1,3] " "the offsets of the final checkpoint"
pipeline 6
assert_eq "$(positions)" "$(offsets 3 6)" "--state --until 6 resumes at 3"
