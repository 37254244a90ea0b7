#!/usr/bin/env bash
# A backlog on 8 partitions: kconsume reads it in large per-partition
# batches. With --announce it names its partitions and says when each is
# caught up, so kwindow's watermark waits for all of them: no record is too
# late, and the windows equal a one-pass count of the input.
source "$(dirname "$0")/lib.sh"
start_broker ev:8
T=$(topic ev)

# 20k events over 2000 s of event time, each up to 2 s out of order.
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 20000 -k 40 -i 100 -j 2000 >"$WORK/events.ndjson"
kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/events.ndjson"

kconsume -b "$BROKERS" -t "$T" -e --announce |
  kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --time-format ms --stats 1h \
    >"$WORK/windows.ndjson" 2>"$WORK/err"
stats=$(grep '"program":"kwindow"' "$WORK/err" | tail -1)
assert_eq "$(jq .late <<<"$stats")" 0 "records too late"
assert_eq "$(jq .in <<<"$stats")" 20000 "records in"

jq -c '[(.ts - .ts % 60000), .user_id]' "$WORK/events.ndjson" | sort | uniq -c |
  awk '{print $2 " " $1}' | sort >"$WORK/want"
jq -c 'select(.emit == "on_time") | "\([.window_start, .key] | tojson) \(.count)"' -r "$WORK/windows.ndjson" |
  sort >"$WORK/got"
assert_files_equal "$WORK/want" "$WORK/got"
