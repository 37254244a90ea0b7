#!/usr/bin/env bash
# --metrics (kpipe(7), METRICS): the README's stateful pipeline keeps one
# Prometheus file per stage; at exit each holds the stage's true counts, the
# checkpoints saved and completed, and kwindow's watermark, in a format a
# parser of Prometheus' text format accepts. A stage waiting for its first
# line has written its file already; a folder that does not exist is a
# usage error.
source "$(dirname "$0")/lib.sh"
start_broker events:3
T=$(topic events)
GEN="$KPIPE_SOURCE_DIR/scripts/gen-events"
S=$(store state)
M=$WORK/metrics
mkdir -p "$M"

"$GEN" -n 900 -k 30 -r 0.1 -s 5 >"$WORK/events"
expect_exit 0 kproduce -b "$BROKERS" -t "$T" -k .user_id --metrics "$M/kproduce.prom" "$WORK/events"
distinct=$(jq -r .event_id "$WORK/events" | sort -u | wc -l)

kconsume -b "$BROKERS" -t "$T" -e --state "$S" --checkpoint-interval 200ms \
  --metrics "$M/kconsume.prom" 2>"$WORK/kconsume.err" |
  kdedup -k .value.event_id --state "$S" --metrics "$M/kdedup.prom" 2>"$WORK/kdedup.err" |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --agg count --state "$S" \
    --flush-at-end --metrics "$M/kwindow.prom" 2>"$WORK/kwindow.err" |
  kcheckpoint commit --state "$S" --passthrough --metrics "$M/commit.prom" \
    >"$WORK/windows" 2>"$WORK/commit.err" ||
  fail "the pipeline failed: $(cat "$WORK"/*.err)"

# value FILE METRIC: the value of METRIC's one series in FILE.
value() {
  awk -v m="$2" '$1 ~ "^" m "[{]" { print $2; n++ } END { if (n != 1) exit 1 }' "$1" ||
    fail "$1 has not exactly one series of $2: $(cat "$1")"
}

# Every line is a comment (# HELP, # TYPE) or NAME{labels} VALUE, each
# series after its own # TYPE line: what the textfile collector parses.
for f in "$M"/*.prom; do
  awk '
    /^# HELP [a-z_]+ .+$/ { next }
    /^# TYPE [a-z_]+ (counter|gauge)$/ { typed[$3] = 1; next }
    /^[a-z_]+[{]program="[a-z]+",stage="[a-z/]+"(,quantile="[0-9.]+")?[}] -?[0-9.e+]+$/ {
      split($1, p, "{"); if (!(p[1] in typed)) { print "untyped: " $0; bad = 1 } next }
    { print "bad line: " $0; bad = 1 }
    END { exit bad }' "$f" || fail "$f is not Prometheus' text format"
  [[ ! -e "$f.tmp" ]] || fail "$f.tmp was left behind"
done

assert_eq "$(value "$M/kproduce.prom" kpipe_records_in_total)" 900 "kproduce in"
assert_eq "$(value "$M/kproduce.prom" kpipe_records_out_total)" 900 "kproduce delivered"
assert_eq "$(value "$M/kconsume.prom" kpipe_records_out_total)" 900 "kconsume out"
assert_eq "$(value "$M/kdedup.prom" kpipe_records_in_total)" 900 "kdedup in"
assert_eq "$(value "$M/kdedup.prom" kpipe_records_out_total)" "$distinct" "kdedup out"
assert_eq "$(value "$M/kdedup.prom" kpipe_records_dropped_total)" $((900 - distinct)) "kdedup dropped"
assert_eq "$(value "$M/kdedup.prom" kpipe_state_size)" "$distinct" "kdedup's keys"
assert_eq "$(value "$M/kwindow.prom" kpipe_records_in_total)" "$distinct" "kwindow in"
assert_eq "$(value "$M/kwindow.prom" kpipe_records_out_total)" "$(wc -l <"$WORK/windows")" "kwindow out"
assert_eq "$(value "$M/kdedup.prom" kpipe_bad_lines_total)" 0 "no bad lines"

# Checkpoints: every one kconsume wrote was saved by both stateful stages
# and completed by the terminal stage; the store agrees.
done_in_store=$(sql "$S" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL")
[[ $done_in_store -ge 1 ]] || fail "no checkpoint completed"
assert_eq "$(value "$M/commit.prom" kpipe_checkpoints_total)" "$done_in_store" "completed"
assert_eq "$(value "$M/kdedup.prom" kpipe_checkpoints_total)" "$done_in_store" "kdedup's saves"
assert_eq "$(value "$M/kwindow.prom" kpipe_checkpoints_total)" "$done_in_store" "kwindow's saves"
last=$(sql "$S" "SELECT completed_at FROM checkpoints WHERE completed_at IS NOT NULL ORDER BY id DESC LIMIT 1")
at=$(value "$M/commit.prom" kpipe_last_checkpoint_timestamp_seconds)
awk -v a="$at" -v l="$last" 'BEGIN { exit !(a * 1000 - l < 1 && l - a * 1000 < 1) }' ||
  fail "the last checkpoint's time $at is not the store's $last ms"
awk -v d="$(value "$M/commit.prom" kpipe_checkpoint_duration_seconds)" 'BEGIN { exit !(d >= 0 && d < 60) }' ||
  fail "checkpoint duration out of range"

# End to end: the records each checkpoint covered, from their Kafka
# timestamps to its completion; kcheckpoint history shows it, and the
# terminal stage's metrics give the last one that had records.
kcheckpoint history --state "$S" --format ndjson >"$WORK/history"
assert_eq "$(jq -s '[.[] | .latency_ms.records // 0] | add' "$WORK/history")" 900 \
  "every record in one checkpoint's latency"
jq -e -s 'all(.[] | select(.latency_ms != null) | .latency_ms;
  .p50 >= 0 and .p50 <= .p99 and .p99 <= .max and .records > 0)' "$WORK/history" >/dev/null ||
  fail "latency quantiles out of order: $(cat "$WORK/history")"
last_p99=$(jq -s '[.[] | select(.latency_ms != null)] | last | .latency_ms.p99' "$WORK/history")
p99=$(awk '$1 ~ /^kpipe_end_to_end_latency_seconds[{].*quantile="0.99"/ { print $2 }' "$M/commit.prom")
awk -v a="$p99" -v b="$last_p99" 'BEGIN { exit !(a * 1000 - b < 1 && b - a * 1000 < 1) }' ||
  fail "the metrics' p99 $p99 s is not the last checkpoint's $last_p99 ms"

# klag --state gives the same beside the pipeline's lag.
klag -b "$BROKERS" --state "$S" --format ndjson >"$WORK/klag" 2>"$WORK/klag.err" ||
  fail "klag --state failed: $(cat "$WORK/klag.err")"
assert_eq "$(tail -1 "$WORK/klag" | jq .latency_ms.p99)" "$last_p99" "klag --state's p99"

# kwindow's watermark: the slowest partition's largest event time (less
# the default watermark delay, 0), as a Unix time in seconds; the lag is
# its distance from now.
expect_exit 0 kconsume -b "$BROKERS" -t "$T" -e
low=$(jq -s 'group_by(.partition) | map(map(.value.ts) | max) | min' "$WORK/out")
wm=$(value "$M/kwindow.prom" kpipe_watermark_timestamp_seconds)
awk -v w="$wm" -v t="$low" 'BEGIN { exit !(w * 1000 == t) }' ||
  fail "watermark $wm is not the slowest partition's largest event time, $low ms"
lag=$(value "$M/kwindow.prom" kpipe_watermark_lag_seconds)
now=$(date +%s)
awk -v l="$lag" -v w="$wm" -v n="$now" 'BEGIN { d = n - w - l; exit !(d > -60 && d < 60) }' ||
  fail "watermark lag $lag is not now less the watermark"

# kupsert as the terminal stage: the checkpoints it completed, with its rows.
U=$(store upsert)
kconsume -b "$BROKERS" -t "$T" -e --state "$U" --checkpoint-interval 200ms 2>"$WORK/kconsume2.err" |
  kupsert --db "$U" --state "$U" --table events --key partition,offset --metrics "$M/kupsert.prom" \
    2>"$WORK/kupsert.err" || fail "kconsume | kupsert failed: $(cat "$WORK"/*.err)"
assert_eq "$(value "$M/kupsert.prom" kpipe_records_in_total)" 900 "kupsert in"
assert_eq "$(value "$M/kupsert.prom" kpipe_records_out_total)" 900 "kupsert rows"
assert_eq "$(value "$M/kupsert.prom" kpipe_checkpoints_total)" \
  "$(sql "$U" "SELECT COUNT(*) FROM checkpoints WHERE completed_at IS NOT NULL")" "kupsert completed"

# A stage waiting for its first line has its file already.
mkfifo "$WORK/in"
kdedup -k .id --metrics "$M/waiting.prom" <"$WORK/in" >/dev/null 2>"$WORK/waiting.err" &
waiting=$!
exec 5>"$WORK/in"
wait_for "the waiting stage's metrics" 10 test -s "$M/waiting.prom"
assert_eq "$(value "$M/waiting.prom" kpipe_records_in_total)" 0 "nothing read yet"
echo '{"id":1}' >&5
exec 5>&-
wait "$waiting" || fail "kdedup failed: $(cat "$WORK/waiting.err")"
assert_eq "$(value "$M/waiting.prom" kpipe_records_in_total)" 1 "written again at exit"

expect_exit 2 kdedup -k .id --metrics "$WORK/no/such/k.prom" /dev/null
assert_eq "$(cat "$WORK/err")" "kdedup: error: --metrics '$WORK/no/such/k.prom': no folder '$WORK/no/such'"
