#!/usr/bin/env bash
# kconsume: each --from form, -e and -c, --partitions, --format value, a
# group resuming exactly where it stopped, a closed pipe, and clear errors
# for a missing topic and an unreachable broker; a read-ahead queue far
# smaller than the backlog.
source "$(dirname "$0")/lib.sh"
start_broker ev:3 ts:2 big:3
T=$(topic ev)
TS=$(topic ts)
BIG=$(topic big)

# 30 records on each of 3 partitions, values numbered per partition.
for p in 0 1 2; do
  for i in $(seq 0 29); do echo "{\"p\":$p,\"i\":$i}"; done | kproduce -b "$BROKERS" -t "$T" -p "$p"
done

count() { expect_exit 0 kconsume -b "$BROKERS" "$@"; wc -l <"$WORK/out"; }

assert_eq "$(count -t "$T" -e)" 90 "earliest -e"
assert_eq "$(count -t "$T" -e --from latest)" 0 "latest -e"
assert_eq "$(count -t "$T" -e --from=-5)" 15 "-5 per partition"
assert_eq "$(count -t "$T" -e --from 25)" 15 "absolute offset 25"
assert_eq "$(count -t "$T" -e --from 1000)" 0 "offset past the end is clamped"
assert_eq "$(count -t "$T" -e --partitions 0,2)" 60 "--partitions"
assert_eq "$(count -t "$T" -e --partitions 1-2 --from=-1)" 2 "--partitions range with -1"
assert_eq "$(count -t "$T" -c 7)" 7 "-c without -e"

# --format value: the values alone.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e --partitions 1 --from=-2 --format value
assert_eq "$(cat "$WORK/out")" $'{"p":1,"i":28}\n{"p":1,"i":29}' "--format value"

# @TIME: envelopes carry their timestamps; @T starts at the first record at
# or after T, on each partition.
for i in $(seq 0 9); do
  echo "{\"partition\":$((i % 2)),\"timestamp\":$((1764412345000 + i * 1000)),\"key\":\"k$i\",\"value\":{\"i\":$i}}"
done | kproduce -b "$BROKERS" -t "$TS" --envelope --keep-partition
expect_exit 0 kconsume -b "$BROKERS" -t "$TS" -e --from @1764412351000
assert_eq "$(jq -c .value.i "$WORK/out" | sort -n | tr '\n' ' ')" "6 7 8 9 " "@epoch-ms"
expect_exit 0 kconsume -b "$BROKERS" -t "$TS" -e --from @2025-11-29T10:32:32Z
assert_eq "$(wc -l <"$WORK/out")" 3 "@RFC 3339"
assert_eq "$(jq -c .value.i "$WORK/out" | sort -n | tr '\n' ' ')" "7 8 9 " "@RFC 3339 records"

# A group commits exactly the records it wrote: -c 40 commits 40, and the
# next member of the group reads the other 50, each once.
G=$(group resume)
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -c 40
jq -c '[.partition, .offset]' "$WORK/out" >"$WORK/first"
assert_eq "$(wc -l <"$WORK/first")" 40 "first run"
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
jq -c '[.partition, .offset]' "$WORK/out" >"$WORK/second"
assert_eq "$(wc -l <"$WORK/second")" 50 "second run reads the rest"
assert_eq "$(sort "$WORK/first" "$WORK/second" | uniq | wc -l)" 90 "no record twice, none lost"
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -g "$G" -e
assert_empty "$WORK/out"

# A read-ahead queue of 8 KiB under a backlog of 1.5 MB: kconsume refills
# it as it drains (librdkafka 2.0.2 alone would look again a second later,
# some 180 times), and every record arrives once, in order per partition.
seq 0 29999 | sed 's/.*/{"i":&,"pad":"..............................."}/' |
  kproduce -b "$BROKERS" -t "$BIG" -k .i
expect_exit 0 kconsume -b "$BROKERS" -t "$BIG" -e -X queued.max.messages.kbytes=8
assert_eq "$(wc -l <"$WORK/out")" 30000 "small queue: every record"
assert_eq "$(jq -r .value.i "$WORK/out" | sort -n | uniq | wc -l)" 30000 "small queue: each once"
for p in 0 1 2; do
  jq -r "select(.partition == $p) | .offset" "$WORK/out" >"$WORK/offsets.$p"
  assert_eq "$(cat "$WORK/offsets.$p")" "$(seq 0 $(($(wc -l <"$WORK/offsets.$p") - 1)))" \
    "small queue: partition $p in order"
done

# A closed downstream pipe is a normal end.
set +o pipefail
kconsume -b "$BROKERS" -t "$T" 2>"$WORK/err" | head -3 >/dev/null
status=${PIPESTATUS[0]}
set -o pipefail
assert_eq "$status" 0 "kconsume | head"
assert_empty "$WORK/err"

# Clear errors. (kbroker creates any topic a client asks about, so a
# missing topic can only be checked on a real broker.)
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  expect_exit 1 kconsume -b "$BROKERS" -t "$(topic missing)" -e
  assert_eq "$(cat "$WORK/err")" "kconsume: error: topic '$(topic missing)' does not exist"
fi
expect_exit 1 kconsume -b 127.0.0.1:1 -t "$T" -e --timeout 2s
assert_eq "$(cat "$WORK/err")" "kconsume: error: cannot reach broker '127.0.0.1:1': connection refused"
expect_exit 2 kconsume -b "$BROKERS" -t "$T" --from latset
assert_eq "$(cat "$WORK/err")" "kconsume: error: --from 'latset': did you mean 'latest'?"
expect_exit 2 kconsume -t "$T"
assert_eq "$(cat "$WORK/err")" "kconsume: error: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS"
