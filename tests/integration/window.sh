#!/usr/bin/env bash
# kwindow behind kconsume on kbroker: envelopes with per-partition
# watermarks, an idle partition that stops holding windows open, and
# windows that survive a restart through the checkpoint protocol.
source "$(dirname "$0")/lib.sh"
start_broker clicks:2 resume:1 live:2
T=$(topic clicks)
R=$(topic resume)
L=$(topic live)

# Two partitions, each in time order: u1 on partition 0, u2 on partition 1.
printf '%s\n' '{"user":"u1","ts":1000,"n":1}' '{"user":"u1","ts":61000,"n":2}' '{"user":"u1","ts":121000,"n":3}' |
  kproduce -b "$BROKERS" -t "$T" -p 0
printf '%s\n' '{"user":"u2","ts":2000,"n":10}' '{"user":"u2","ts":3000,"n":20}' |
  kproduce -b "$BROKERS" -t "$T" -p 1

# Whatever order kconsume interleaves the partitions in, a delay that covers
# the whole stream makes every window fire at the end, complete.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
cp "$WORK/out" "$WORK/envelopes.ndjson"
expect_exit 0 kwindow --time .value.ts --key .value.user --tumble 1m --watermark 10m --agg count \
  --agg sum:.value.n --time-format ms "$WORK/envelopes.ndjson"
assert_empty "$WORK/err"
sort "$WORK/out" >"$WORK/sorted"
cat >"$WORK/want" <<'OUT'
{"window_start":0,"window_end":60000,"key":"u1","count":1,"sum_n":1,"emit":"on_time"}
{"window_start":0,"window_end":60000,"key":"u2","count":2,"sum_n":30,"emit":"on_time"}
{"window_start":120000,"window_end":180000,"key":"u1","count":1,"sum_n":3,"emit":"on_time"}
{"window_start":60000,"window_end":120000,"key":"u1","count":1,"sum_n":2,"emit":"on_time"}
OUT
assert_files_equal "$WORK/sorted" "$WORK/want"

# Per-partition watermarks: records taken round-robin from the partitions.
# Partition 1 stops at 3s, so it holds the watermark there: without
# --idle-timeout nothing fires before the end.
jq -c '[.offset, .partition, .]' "$WORK/envelopes.ndjson" | sort | jq -c '.[2]' >"$WORK/interleaved.ndjson"
expect_exit 0 kwindow --time .value.ts --tumble 1m --time-format ms --stats 1h "$WORK/interleaved.ndjson"
assert_eq "$(head -1 "$WORK/out")" '{"window_start":0,"window_end":60000,"count":3,"emit":"on_time"}' "first window"
assert_eq "$(grep -c '"late":0' "$WORK/err")" 1 "no late record"

# Live, with --idle-timeout. kwindow first sees one record from each
# partition (which one first does not matter: neither closes a window),
# then only partition 0 goes on: partition 1, silent, stops holding the
# watermark back and the windows fire while kconsume is still running.
printf '%s\n' '{"ts":1000}' | kproduce -b "$BROKERS" -t "$L" -p 0
printf '%s\n' '{"ts":2000}' | kproduce -b "$BROKERS" -t "$L" -p 1
mkfifo "$WORK/envs" "$WORK/windows" "$WORK/stats"
kconsume -b "$BROKERS" -t "$L" >"$WORK/envs" 2>"$WORK/consume.err" &
CONSUME_PID=$!
kwindow --time .value.ts --tumble 1m --idle-timeout 500ms --time-format ms --stats 100ms <"$WORK/envs" \
  >"$WORK/windows" 2>"$WORK/stats" &
WINDOW_PID=$!
exec 8<"$WORK/windows" 9<"$WORK/stats"
seen=""
while read -r -t 30 stats <&9; do
  if jq -e '.in == 2' <<<"$stats" >/dev/null 2>&1; then seen=yes; break; fi
done
[[ -n $seen ]] || fail "kwindow did not see the first two records"
cat <&9 >"$WORK/stats.rest" &
printf '%s\n' '{"ts":61000}' '{"ts":121000}' | kproduce -b "$BROKERS" -t "$L" -p 0
read -r -t 30 first <&8 || fail "no window fired while partition 1 was idle"
read -r -t 30 second <&8 || fail "only one window fired while partition 1 was idle"
assert_eq "$first" '{"window_start":0,"window_end":60000,"count":2,"emit":"on_time"}' "first live window"
assert_eq "$second" '{"window_start":60000,"window_end":120000,"count":1,"emit":"on_time"}' "second live window"
# Stopping kconsume ends kwindow's input: the open window fires at the end.
kill -TERM "$CONSUME_PID"
read -r -t 30 third <&8 || fail "the last window did not fire at the end"
assert_eq "$third" '{"window_start":120000,"window_end":180000,"count":1,"emit":"on_time"}' "last window"
wait "$WINDOW_PID" || fail "kwindow exited $?"
exec 8<&- 9<&-

# Checkpoints: the open window is saved at kconsume's last checkpoint and
# the next run goes on with it.
printf '%s\n' '{"user":"u1","ts":1000}' '{"user":"u1","ts":61000}' | kproduce -b "$BROKERS" -t "$R"
run_pipeline() {
  kconsume -b "$BROKERS" -t "$R" -e --state "$WORK/state.db" |
    kwindow --state "$WORK/state.db" --time .value.ts --key .value.user --tumble 1m --time-format ms |
    kcheckpoint commit --state "$WORK/state.db" --passthrough
}
run_pipeline >"$WORK/run1" 2>"$WORK/run1.err"
assert_eq "$(cat "$WORK/run1")" '{"window_start":0,"window_end":60000,"key":"u1","count":1,"emit":"on_time"}' "first run"
printf '%s\n' '{"user":"u1","ts":62000}' '{"user":"u1","ts":130000}' | kproduce -b "$BROKERS" -t "$R"
run_pipeline >"$WORK/run2" 2>"$WORK/run2.err"
assert_eq "$(cat "$WORK/run2")" '{"window_start":60000,"window_end":120000,"key":"u1","count":2,"emit":"on_time"}' \
  "second run"
expect_exit 0 kcheckpoint show --state "$WORK/state.db" --format ndjson
assert_contains "$WORK/out" '"offset":4'
