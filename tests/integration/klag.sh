#!/usr/bin/env bash
# klag against a broker: exact per-partition lag of a group that read part
# of a topic, lag in seconds from the records' own timestamps, partitions
# the group never committed on counted from their log start (kpipe issue
# 22) and --uncommitted, the health rules over real samples (WARN, STALL,
# STOP, REWIND, and STOP of a state file from its commit times),
# --no-fetch, a parser check of the prometheus output, alerts both ways,
# and clear errors.
source "$(dirname "$0")/lib.sh"
start_broker ev:4 quiet:2 fleet:4 idle:2
T=$(topic ev)
Q=$(topic quiet)

# rfc3339_ms TEXT: epoch milliseconds of klag's "at" (always .mmmZ).
rfc3339_ms() { jq -rn --arg t "$1" '($t | sub("\\.[0-9]{3}Z$"; "Z") | fromdateiso8601) * 1000 + ($t[20:23] | tonumber)'; }

# 1. Exact lag. 50 records per partition with known timestamps: record k of
# partition p was produced at t0 + 1000 p + k.
t0=$(($(date +%s%3N) - 3600000))
jq -nc --arg t "$T" --argjson t0 "$t0" \
  'range(4) as $p | range(50) as $k |
   {topic: $t, partition: $p, offset: $k, timestamp: ($t0 + 1000 * $p + $k), key: "k\($k)", value: {p: $p, k: $k}}' \
  >"$WORK/records.ndjson"
kproduce -b "$BROKERS" -t "$T" --envelope --keep-partition "$WORK/records.ndjson"
G=$(group part)
# kconsume commits exactly what it wrote: the committed offset of each
# partition is one past the last record it wrote from there.
kconsume -b "$BROKERS" -t "$T" -g "$G" -c 90 >"$WORK/consumed.ndjson"
jq -s -c 'group_by(.partition) | map({key: (.[0].partition | tostring), value: (map(.offset) | max + 1)}) | from_entries' \
  "$WORK/consumed.ndjson" >"$WORK/committed.json"
assert_eq "$(jq '[.[]] | add' "$WORK/committed.json")" 90 "records committed by kconsume"

expect_exit 0 klag -b "$BROKERS" -g "$G" --format ndjson
cp "$WORK/out" "$WORK/lag.ndjson"
at=$(rfc3339_ms "$(jq -r 'select(.at) | .at' "$WORK/lag.ndjson")")
# Expected per partition: committed from kconsume's own output (null where
# it read nothing: then counted from the log start, 0), end 50, lag, and the
# time since the record at the committed offset (or the log start) was
# produced (0 when caught up).
jq -c --slurpfile c "$WORK/committed.json" --argjson t0 "$t0" --argjson at "$at" --arg g "$G" --arg t "$T" -n \
  'range(4) as $p | ($c[0][$p | tostring]) as $off | ($off // 0) as $from |
   {group: $g, topic: $t, partition: $p, committed: $off} +
   (if $off == null then {assumed: "earliest"} else {} end) +
   {end: 50, lag: (50 - $from),
    lag_seconds: (if $from >= 50 then 0 else ($at - ($t0 + 1000 * $p + $from)) / 1000 end)}' \
  >"$WORK/want.ndjson"
jq -c 'select(.partition != null) | del(.status)' "$WORK/lag.ndjson" >"$WORK/got.ndjson"
diff "$WORK/want.ndjson" "$WORK/got.ndjson" || fail "per-partition lag differs (- expected, + got)"
total=$(jq -s 'map(.lag // 0) | add' "$WORK/want.ndjson")
# kbroker cannot describe groups (members unknown: null); a real broker
# says the group has no member now that kconsume has left.
members=null
[[ "$KPIPE_TEST_BROKER" == kafka ]] && members=0
assert_eq "$(jq -c 'select(.at) | [.lag, .status, .members]' "$WORK/lag.ndjson")" "[$total,\"OK\",$members]" "group line"
# The topic's total line.
assert_eq "$(jq -c "select(.partitions and .topic) | [.partitions, .lag]" "$WORK/lag.ndjson")" "[4,$total]" "topic line"
assert_eq "$total" 110 "lag: every record kconsume did not read"
uncommitted=$(jq -s 'map(select(.committed == null)) | length' "$WORK/want.ndjson")
over=""
if [[ $uncommitted -gt 0 ]]; then
  assert_contains "$WORK/err" "klag: warning: group '$G' has no committed offset on $uncommitted partition"
  over=" ($((50 * uncommitted)) of it on $uncommitted partition$( ((uncommitted == 1)) || echo s) without a committed offset)"
else
  assert_empty "$WORK/err"
fi

# --max-lag, both ways: the report on stdout, one line on stderr, exit 3.
expect_exit 0 klag -b "$BROKERS" -g "$G" --format ndjson --max-lag "$total"
expect_exit 3 klag -b "$BROKERS" -g "$G" --format ndjson --max-lag $((total - 1)) -q
assert_eq "$(cat "$WORK/err")" "klag: error: group '$G': lag $total is over --max-lag $((total - 1))$over" "alert line"
assert_eq "$(jq -s length "$WORK/out")" "$(jq -s length "$WORK/lag.ndjson")" "the report before the alert"
# The records are an hour old: --max-lag-seconds fires at 3000, not 7200.
expect_exit 0 klag -b "$BROKERS" -g "$G" --format ndjson --max-lag-seconds 7200
expect_exit 3 klag -b "$BROKERS" -g "$G" --format ndjson --max-lag-seconds 3000 -q
assert_contains "$WORK/err" "s behind, over --max-lag-seconds 3000"

# 2. Partitions without a committed offset: in the table, counted from the
# log start and marked "*", with a note under the table and a warning
# naming them; with --uncommitted ignore, "-" as klag showed them before. A
# pipeline mirrors its offsets of partitions 0 and 1 into a group
# (kcheckpoint sync, as kconsume --state does).
H2=$(group half)
printf '{"topic":"%s","partition":0,"offset":10}\n{"topic":"%s","partition":1,"offset":50}\n' "$T" "$T" |
  kcheckpoint import --state "$WORK/half.db"
expect_exit 0 kcheckpoint sync --state "$WORK/half.db" -b "$BROKERS" --to-group "$H2"
expect_exit 0 klag -b "$BROKERS" -g "$H2" --format table
assert_eq "$(awk '$3 == 2 || $3 == 3 {print $3, $4, $5, $6, $8}' "$WORK/out" | tr '\n' ';')" \
  "2 0* 50 50 OK;3 0* 50 50 OK;" "partitions 2 and 3 from the log start"
assert_eq "$(awk '$3 == 0 {print $4, $5, $6}' "$WORK/out")" "10 50 40" "partition 0"
assert_eq "$(awk '$2 == "TOTAL" {print $3}' "$WORK/out")" 140 "total"
assert_eq "$(tail -n 1 "$WORK/out")" \
  "* nothing committed: counted from the log start offset, where a consumer with auto.offset.reset=earliest begins (--uncommitted earliest)" "note"
assert_eq "$(cat "$WORK/err")" \
  "klag: warning: group '$H2' has no committed offset on 2 partitions of topic '$T' (2,3): counted from the log start offset (--uncommitted earliest)" "warning"
expect_exit 0 klag -b "$BROKERS" -g "$H2" --format table --uncommitted ignore
assert_eq "$(awk '$3 == 2 || $3 == 3 {print $3, $4, $6, $7, $8}' "$WORK/out" | tr '\n' ';')" \
  "2 - - - -;3 - - - -;" "partitions 2 and 3 ignored"
assert_eq "$(awk '$2 == "TOTAL" {print $3}' "$WORK/out")" 40 "total, ignoring them"
assert_eq "$(grep -c '^\*' "$WORK/out")" 0 "no note"
assert_eq "$(cat "$WORK/err")" \
  "klag: warning: group '$H2' has no committed offset on 2 partitions of topic '$T' (2,3): shown as -" "warning"
expect_exit 2 klag -b "$BROKERS" -g "$H2" --uncommitted earlest
assert_eq "$(cat "$WORK/err")" "klag: error: unknown --uncommitted 'earlest', did you mean 'earliest'?" "mistyped mode"

# 2b. kpipe issue 22, as reported: `kconsume -g G -c 600` on four
# partitions commits on two, and klag must count the records never read.
# The 600 records on partitions 0 and 1 are all there is when kconsume
# reads, so that it commits on those two and no other; then 76 more arrive
# there and 324 on partitions 2 and 3 (record k of partition p produced at
# t1 + 1000 p + k).
F=$(topic fleet)
GF=$(group fleet)
t1=$(($(date +%s%3N) - 1800000))
records() { # FROM TO PARTITIONS...: records FROM..TO-1 of each partition
  local from=$1 to=$2
  shift 2
  jq -nc --arg t "$F" --argjson t1 "$t1" --argjson from "$from" --argjson to "$to" --argjson ps "[$(
    IFS=,
    echo "$*"
  )]" \
    '$ps[] as $p | range($from; $to) as $k |
     {topic: $t, partition: $p, offset: $k, timestamp: ($t1 + 1000 * $p + $k), key: "k\($k)", value: {p: $p, k: $k}}' |
    kproduce -b "$BROKERS" -t "$F" --envelope --keep-partition
}
records 0 300 0 1
kconsume -b "$BROKERS" -t "$F" -g "$GF" -c 600 >"$WORK/fleet.ndjson"
assert_eq "$(jq -s -c 'map(.partition) | unique' "$WORK/fleet.ndjson")" "[0,1]" "partitions kconsume read"
records 300 338 0 1
records 0 162 2 3
# Without the fix klag said 76 here; 400 records are unread.
expect_exit 3 klag -b "$BROKERS" -g "$GF" --format ndjson --max-lag 100
assert_eq "$(cat "$WORK/err")" \
  "klag: warning: group '$GF' has no committed offset on 2 partitions of topic '$F' (2,3): counted from the log start offset (--uncommitted earliest)
klag: error: group '$GF': lag 400 is over --max-lag 100 (324 of it on 2 partitions without a committed offset)" "issue 22 alert"
cp "$WORK/out" "$WORK/fleet.lag"
at=$(rfc3339_ms "$(jq -r 'select(.at) | .at' "$WORK/fleet.lag")")
assert_eq "$(jq -c 'select(.partition != null) | [.partition, .committed, .assumed, .end, .lag, .status]' "$WORK/fleet.lag" | tr '\n' ' ')" \
  '[0,300,null,338,38,"OK"] [1,300,null,338,38,"OK"] [2,null,"earliest",162,162,"OK"] [3,null,"earliest",162,162,"OK"] ' "issue 22 partitions"
# Behind by the age of the oldest record left: the one at the log start.
assert_eq "$(jq -c 'select(.partition == 3) | .lag_seconds' "$WORK/fleet.lag")" \
  "$(jq -n --argjson at "$at" --argjson t1 "$t1" '($at - ($t1 + 3000)) / 1000')" "lag seconds from the log start"
assert_eq "$(jq -c 'select(.at) | .lag' "$WORK/fleet.lag")" 400 "issue 22 group lag"
assert_eq "$(jq -c 'select(.partitions and .topic) | .lag' "$WORK/fleet.lag")" 400 "issue 22 topic lag"
# The status rules judge them too: over two samples in which nothing was
# read, partitions 2 and 3 stall from their log start, as 0 and 1 do from
# their committed offsets, and --fail-on fires.
expect_exit 0 klag -b "$BROKERS" -g "$GF" --history "$WORK/fleet.db" --window 2 --format ndjson -q
expect_exit 3 klag -b "$BROKERS" -g "$GF" --history "$WORK/fleet.db" --window 2 --format ndjson --fail-on STALL -q
assert_eq "$(jq -c 'select(.partition != null) | .status' "$WORK/out" | tr '\n' ' ')" \
  '"STALL" "STALL" "STALL" "STALL" ' "issue 22 statuses"
assert_contains "$WORK/err" "klag: error: group '$GF' is STALL (--fail-on STALL): $F [0]: offset 300 did not move"
# The history keeps them with committed NULL, marked.
assert_eq "$(sqlite3 "$WORK/fleet.db" "SELECT partition, IFNULL(committed, 'NULL'), IFNULL(assumed, 'NULL'), log_start, end_offset FROM lag_partitions WHERE at = (SELECT MAX(at) FROM lag_partitions) ORDER BY partition" | tr '\n' ' ')" \
  "0|300|NULL|0|338 1|300|NULL|0|338 2|NULL|earliest|0|162 3|NULL|earliest|0|162 " "history rows"
# --uncommitted ignore: the figure klag gave before, and no alert.
expect_exit 0 klag -b "$BROKERS" -g "$GF" --format ndjson --max-lag 100 --uncommitted ignore -q
assert_eq "$(jq -c 'select(.at) | .lag' "$WORK/out")" 76 "lag with --uncommitted ignore"
assert_eq "$(jq -c 'select(.partition == 2) | [.committed, .assumed, .lag, .status]' "$WORK/out")" "[null,null,null,null]" "partition 2 ignored"
# --uncommitted latest: no lag there, but marked.
expect_exit 0 klag -b "$BROKERS" -g "$GF" --format ndjson --max-lag 100 --uncommitted latest -q
assert_eq "$(jq -c 'select(.partition == 2) | [.committed, .assumed, .lag, .lag_seconds]' "$WORK/out")" '[null,"latest",0,0]' "partition 2 at the end"
assert_eq "$(jq -c 'select(.at) | .lag' "$WORK/out")" 76 "lag with --uncommitted latest"
# The table marks them, and the prometheus output counts them.
expect_exit 0 klag -b "$BROKERS" -g "$GF" --format table -q
assert_eq "$(awk '$3 == 2 {print $4, $6}' "$WORK/out")" "0* 162" "table row"
assert_eq "$(awk '$2 == "TOTAL" {print $3}' "$WORK/out")" 400 "table total"
expect_exit 0 klag -b "$BROKERS" -g "$GF" --format prometheus -q
assert_contains "$WORK/out" "kpipe_consumer_lag{group=\"$GF\",topic=\"$F\",partition=\"3\"} 162"
assert_contains "$WORK/out" "kpipe_consumer_group_lag{group=\"$GF\"} 400"
assert_contains "$WORK/out" "kpipe_consumer_group_uncommitted_partitions{group=\"$GF\"} 2"

# 2c. For fleets: a row per group and topic, kafka_exporter's metric
# names, and groups chosen by a pattern or all of them.
expect_exit 3 klag -b "$BROKERS" -g "$GF" --format ndjson --granularity topic --max-lag 100 -q
assert_eq "$(jq -c 'del(.at, .members, .group_state)' "$WORK/out" | tr '\n' ' ')" \
  "{\"group\":\"$GF\",\"topic\":\"$F\",\"partitions\":4,\"uncommitted\":2,\"lag\":400,\"lag_seconds\":$(jq 'select(.at) | .lag_seconds' "$WORK/out"),\"status\":\"OK\"} {\"group\":\"$GF\",\"partitions\":4,\"lag\":400,\"lag_seconds\":$(jq 'select(.at) | .lag_seconds' "$WORK/out"),\"status\":\"OK\"} " \
  "--granularity topic"
expect_exit 0 klag -b "$BROKERS" -g "$GF" -g "$H2" --format table --granularity topic -q
assert_eq "$(awk '$1 == G {print $2, $3, $4}' G="$GF" "$WORK/out" | tr '\n' ';')" "$F 4* 400;TOTAL 4 400;" "topic table"
assert_eq "$(awk '$1 == G {print $2, $3, $4}' G="$H2" "$WORK/out" | tr '\n' ';')" "$T 4* 140;TOTAL 4 140;" "topic table, second group"
expect_exit 0 klag -b "$BROKERS" -g "$GF" -g "$H2" --format prometheus --metric-names kafka_exporter -q
assert_contains "$WORK/out" "kafka_consumergroup_lag{consumergroup=\"$GF\",topic=\"$F\",partition=\"2\"} 162"
assert_contains "$WORK/out" "kafka_consumergroup_lag_sum{consumergroup=\"$H2\",topic=\"$T\"} 140"
assert_contains "$WORK/out" "kafka_consumergroup_current_offset{consumergroup=\"$GF\",topic=\"$F\",partition=\"0\"} 300"
assert_contains "$WORK/out" "kafka_topic_partition_current_offset{topic=\"$F\",partition=\"3\"} 162"
cp "$WORK/out" "$WORK/exporter.prom"
expect_exit 2 klag -b "$BROKERS" -g "$GF" --format ndjson --metric-names kafka_exporter
assert_eq "$(cat "$WORK/err")" "klag: error: --metric-names names the metrics of --format prometheus: give that too" "names without prometheus"
expect_exit 2 klag -b "$BROKERS" -g "$GF" --format prometheus --metric-names kafka_exportr
assert_eq "$(cat "$WORK/err")" "klag: error: unknown --metric-names 'kafka_exportr', did you mean 'kafka_exporter'?" "mistyped names"
expect_exit 2 klag -b "$BROKERS" -g "$GF" --all-groups
assert_eq "$(cat "$WORK/err")" "klag: error: --all-groups takes every group: give no -g with it" "--all-groups with -g"
expect_exit 2 klag -b "$BROKERS" -g "$RUN_ID-(fleet"
assert_contains "$WORK/err" "klag: error: -g '$RUN_ID-(fleet' is not a regular expression: "
# Patterns (whole ids) and --all-groups ask the cluster for its groups,
# which kbroker cannot answer; klag status matches its history's groups.
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  expect_exit 0 klag -b "$BROKERS" -g "$RUN_ID-g-(fleet|half)" -g "$RUN_ID-g-fl(e)" --format ndjson -q
  assert_eq "$(jq -r 'select(.at) | .group' "$WORK/out" | tr '\n' ' ')" "$GF $H2 " "groups matching"
  # Every group that consumes $F: only the one that committed on it.
  expect_exit 0 klag -b "$BROKERS" --all-groups -t "$F" --format ndjson --granularity topic -q
  assert_eq "$(jq -r 'select(.at) | .group' "$WORK/out" | tr '\n' ' ')" "$GF " "--all-groups on $F"
  expect_exit 1 klag -b "$BROKERS" -g "$RUN_ID-nothing-.*"
  assert_eq "$(cat "$WORK/err")" "klag: error: no consumer group matches -g '$RUN_ID-nothing-.*'" "no match"
else
  expect_exit 1 klag -b "$BROKERS" -g "$RUN_ID-g-.*"
  assert_eq "$(cat "$WORK/err")" \
    "klag: error: the broker cannot list consumer groups (kbroker answers no ListGroups), which -g '$RUN_ID-g-.*' needs: name the groups with -g" "kbroker cannot list"
fi
expect_exit 0 klag status -g "$RUN_ID-g-f.*" --history "$WORK/fleet.db" --window 2 --format ndjson --granularity topic
assert_eq "$(jq -r 'select(.at) | .group' "$WORK/out")" "$GF" "status of a pattern"
expect_exit 0 klag status --all-groups --history "$WORK/fleet.db" --window 2 --format ndjson
assert_eq "$(jq -r 'select(.at) | .group' "$WORK/out")" "$GF" "status of every group"
expect_exit 1 klag status -g "$RUN_ID-none-.*" --history "$WORK/fleet.db"
assert_eq "$(cat "$WORK/err")" "klag: error: history '$WORK/fleet.db' holds no samples of a group matching -g '$RUN_ID-none-.*'" "status: no match"

# A group with a member and no commit at all is known by its member's
# assignment (DescribeGroups; kbroker answers none, so real Kafka only). The
# member is a kconsume whose reader never reads: it commits only what was
# read (kpipe(7)), so nothing.
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  I=$(topic idle)
  GI=$(group idle)
  mkfifo "$WORK/idle.fifo"
  exec 7<>"$WORK/idle.fifo"
  kconsume -b "$BROKERS" -t "$I" -g "$GI" >"$WORK/idle.fifo" 2>"$WORK/idle.err" &
  idle_pid=$!
  # Joined once klag sees the member and both partitions it was assigned.
  idle_joined() {
    klag -b "$BROKERS" -g "$GI" --format ndjson >"$WORK/idle.lag" 2>/dev/null &&
      [[ "$(jq -c 'select(.at) | [.partitions, .members]' "$WORK/idle.lag")" == "[2,1]" ]]
  }
  wait_for "kconsume to join group $GI" 60 idle_joined
  seq 20 | jq -c '{n: .}' | kproduce -b "$BROKERS" -t "$I" --partition 0
  seq 10 | jq -c '{n: .}' | kproduce -b "$BROKERS" -t "$I" --partition 1
  expect_exit 3 klag -b "$BROKERS" -g "$GI" --format ndjson --max-lag 10 -q
  assert_eq "$(jq -c 'select(.partition != null) | [.partition, .committed, .assumed, .lag]' "$WORK/out" | tr '\n' ' ')" \
    '[0,null,"earliest",20] [1,null,"earliest",10] ' "assigned partitions"
  assert_eq "$(cat "$WORK/err")" "klag: error: group '$GI': lag 30 is over --max-lag 10 (30 of it on 2 partitions without a committed offset)" "assigned alert"
  kill "$idle_pid"
  wait "$idle_pid" || true
  exec 7<&-
fi

# 3. A group that does not exist; a broker that cannot be reached.
expect_exit 1 klag -b "$BROKERS" -g "$(group nobody)"
if [[ "$KPIPE_TEST_BROKER" == kafka ]]; then
  assert_eq "$(cat "$WORK/err")" "klag: error: consumer group '$(group nobody)' does not exist" "unknown group"
else
  # kbroker cannot describe groups: klag says what it can tell.
  assert_eq "$(cat "$WORK/err")" "klag: error: consumer group '$(group nobody)' has no committed offsets: it does not exist, or has committed none yet (the broker cannot tell which)" "unknown group"
fi
assert_empty "$WORK/out"
run_kbroker "$WORK/dead.out" /dev/null || fail "second kbroker did not start"
dead=$KBROKER_ADDRESS dead_pid=$KBROKER_PID
kill "$dead_pid"
wait "$dead_pid" || true
exec {KBROKER_OUT}<&-
start=$(date +%s%3N)
expect_exit 1 klag -b "$dead" -g "$G" --timeout 1s
elapsed=$(($(date +%s%3N) - start))
assert_eq "$(cat "$WORK/err")" "klag: error: cannot reach broker '$dead': connection refused" "unreachable broker"
[[ $elapsed -lt 4000 ]] || fail "klag took ${elapsed}ms to give up with --timeout 1s"

# 4. The rules over real samples. A pipeline's offsets of $Q [0] are
# mirrored into group W; each klag run appends a sample to the history and
# judges the last 3 (kbroker cannot tell the members: STOP from offsets).
W=$(group rules)
HIST=$WORK/history.db
commit_w() {
  printf '{"topic":"%s","partition":0,"offset":%d}\n' "$Q" "$1" | kcheckpoint import --state "$WORK/w.db"
  expect_exit 0 kcheckpoint sync --state "$WORK/w.db" -b "$BROKERS" --to-group "$W"
}
produce_q() { seq "$1" | jq -c '{n: .}' | kproduce -b "$BROKERS" -t "$Q" --partition 0; }
sample_w() {
  expect_exit "${2:-0}" klag -b "$BROKERS" -g "$W" -t "$Q" --history "$HIST" --window 3 --format ndjson "${@:3}"
  assert_eq "$(jq -r 'select(.at) | .status' "$WORK/out")" "$1" "status after sample $((++samples))"
}
samples=0
produce_q 30
commit_w 10
sample_w OK         # one sample: no trend yet
produce_q 20
commit_w 15
sample_w WARN       # the offset moved (10 -> 15), the lag grew (20 -> 35)
produce_q 5
sample_w WARN       # 10, 15, 15 in the window: moved, lag never decreased
sample_w STALL      # 15, 15, 15: unmoved in the window, moved just before it
sample_w STOP 0     # unmoved for longer than the window
# What is known of the group's members: kbroker cannot describe groups.
members_said=" (the broker cannot tell whether the group has active members)"
[[ "$KPIPE_TEST_BROKER" == kafka ]] && members_said=", and the group has no active member"
reason=$(jq -r 'select(.at) | .reason' "$WORK/out")
[[ "$reason" =~ ^"$Q [0]: offset 15 has not moved for longer than the window (3 samples over "[0-9hms]*"), lag 40$members_said"$ ]] ||
  fail "STOP reason: $reason"
expect_exit 0 klag -b "$BROKERS" -g "$W" -t "$Q" --format table --history "$HIST" --window 3 --keep 1h
# Only kbroker leaves klag unable to tell whether members are active.
if [[ "$KPIPE_TEST_BROKER" != kafka ]]; then
  assert_contains "$WORK/out" "note: group '$W': STOP judged from the offsets alone"
fi
# klag status judges the same history without a broker, and --fail-on
# fires at STOP.
expect_exit 3 klag status -g "$W" --history "$HIST" --window 3 --fail-on stop --format ndjson
assert_contains "$WORK/err" "klag: error: group '$W' is STOP (--fail-on STOP): $Q [0]: offset 15 has not moved"
# A reset backwards (kafka-consumer-groups --reset-offsets, the kpipe way):
# REWIND.
expect_exit 0 kcheckpoint reset --state "$WORK/w.db" -b "$BROKERS" --to-offset 5 --execute
expect_exit 0 kcheckpoint sync --state "$WORK/w.db" -b "$BROKERS" --to-group "$W"
samples=6
sample_w REWIND 3 --fail-on REWIND -q
assert_eq "$(cat "$WORK/err")" \
  "klag: error: group '$W' is REWIND (--fail-on REWIND): $Q [0]: the committed offset went back from 15 to 5" "REWIND alert"

# 5. --no-fetch: the lag in seconds interpolated from the end offsets the
# history saw. The record at offset 5 was produced before the first sample
# saw the end at 30: extrapolated from the first two end offsets seen, so
# it lies before that sample; and no record was read.
expect_exit 0 klag -b "$BROKERS" -g "$W" -t "$Q" --history "$HIST" --window 3 --format ndjson --no-fetch
est=$(jq -r 'select(.partition == 0) | .lag_seconds' "$WORK/out")
now=$(rfc3339_ms "$(jq -r 'select(.at) | .at' "$WORK/out")")
first=$(sqlite3 "$HIST" "SELECT MIN(at) FROM lag_samples WHERE subject = '$W'")
[[ "$est" != null ]] || fail "--no-fetch gave no estimate"
jq -en --argjson est "$est" --argjson floor "$(((now - first) / 1000))" '$est >= $floor' >/dev/null ||
  fail "--no-fetch estimate ${est}s is later than the first sample ($(((now - first) / 1000))s ago)"

# 6. A state file: STOP once nothing was committed for longer than the
# window spans, STALL while the pipeline still commits the same offsets.
S=$WORK/pipe.db
printf '{"topic":"%s","partition":1,"offset":2}\n' "$Q" | kcheckpoint import --state "$S"
produce_one() { echo '{"n":0}' | kproduce -b "$BROKERS" -t "$Q" --partition 1; }
produce_one
produce_one
produce_one
sample_s() {
  expect_exit 0 klag -b "$BROKERS" --state "$S" --history "$HIST" --window 2 --format ndjson
  assert_eq "$(jq -r 'select(.at) | .status' "$WORK/out")" "$1" "state status"
}
sample_s OK
sample_s STALL
sample_s STOP
assert_contains "$WORK/out" '"state":"'"$S"'"'
reason=$(jq -r 'select(.at) | .reason' "$WORK/out")
[[ "$reason" == *"and nothing was committed for "* ]] || fail "state STOP reason: $(cat "$WORK/out")"
# The pipeline commits again (the same offset): running, stuck.
printf '{"topic":"%s","partition":1,"offset":2}\n' "$Q" | kcheckpoint import --state "$S"
sample_s STALL

# 7. The prometheus output passes a parser check with promtool's rules.
cat >"$WORK/promcheck.py" <<'PY'
import math, re, sys
NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*$')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
def fail(n, msg):
    sys.exit(f"line {n}: {msg}")
def parse_value(n, text):
    if text in ("NaN", "+Inf", "-Inf", "Inf"):
        return
    if not re.fullmatch(r'[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?', text):
        fail(n, f"invalid float {text!r}")
    if not math.isfinite(float(text)):
        fail(n, f"invalid float {text!r}")
def parse_labels(n, text, i):
    labels = []
    i += 1
    while True:
        if text[i] == '}':
            return labels, i + 1
        m = re.match(r'[a-zA-Z_][a-zA-Z0-9_]*', text[i:])
        if not m:
            fail(n, "bad label name")
        name = m.group(0)
        if name.startswith("__"):
            fail(n, f"reserved label name {name}")
        i += len(name)
        if text[i:i + 2] != '="':
            fail(n, "expected =\" after a label name")
        i += 2
        value = ""
        while text[i] != '"':
            if text[i] == '\\':
                if text[i + 1] not in '\\"n':
                    fail(n, f"bad escape \\{text[i + 1]}")
                value += text[i:i + 2]
                i += 2
                continue
            if text[i] == '\n':
                fail(n, "raw newline in a label value")
            value += text[i]
            i += 1
        i += 1
        if name in [l[0] for l in labels]:
            fail(n, f"duplicate label {name}")
        labels.append((name, value))
        if text[i] == ',':
            i += 1
        elif text[i] != '}':
            fail(n, "expected , or } after a label")
data = sys.stdin.read()
if not data.endswith("\n"):
    sys.exit("the last line does not end with a newline")
helps, types, seen_samples, series, finished = set(), {}, set(), set(), set()
current = None
for n, line in enumerate(data[:-1].split("\n"), 1):
    if line == "":
        continue
    if line.startswith("#"):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
            name = parts[2]
            if not NAME.match(name):
                fail(n, f"bad metric name {name!r}")
            if name in seen_samples:
                fail(n, f"{parts[1]} for {name} after its samples")
            if parts[1] == "HELP":
                if name in helps:
                    fail(n, f"second HELP for {name}")
                helps.add(name)
            else:
                if name in types:
                    fail(n, f"second TYPE for {name}")
                if len(parts) != 4 or parts[3] not in TYPES:
                    fail(n, f"bad TYPE line {line!r}")
                types[name] = parts[3]
        continue
    m = re.match(r'[a-zA-Z_:][a-zA-Z0-9_:]*', line)
    if not m:
        fail(n, "a sample must start with a metric name")
    name = m.group(0)
    i = len(name)
    labels = []
    if i < len(line) and line[i] == '{':
        labels, i = parse_labels(n, line + "\0", i)
    if line[i:i + 1] != " ":
        fail(n, "expected a space before the value")
    fields = line[i + 1:].split(" ")
    if len(fields) != 1:
        fail(n, "a timestamp (the textfile collector refuses them) or junk after the value")
    parse_value(n, fields[0])
    # The text format allows untyped samples; klag promises HELP and TYPE
    # for every metric, before its samples.
    if name not in types or name not in helps:
        fail(n, f"sample of {name} before (or without) its HELP and TYPE")
    if current != name:
        if name in finished:
            fail(n, f"samples of {name} are not contiguous")
        if current is not None:
            finished.add(current)
        current = name
    seen_samples.add(name)
    key = (name, tuple(sorted(labels)))
    if key in series:
        fail(n, f"duplicate series {name}{dict(labels)}")
    series.add(key)
print(f"ok: {len(series)} series")
PY
if ! command -v python3 >/dev/null; then
  echo "SKIP (python3 missing): prometheus parser check"
else
  # The checker refuses what promtool refuses.
  # Each refused for its own reason: a sample without HELP, without TYPE, a
  # duplicate series, a duplicate label, a bad escape, a bad float, a family
  # split in two, a timestamp, a bad metric name, a reserved label name, a
  # HELP after the samples.
  x=$'# HELP x h\n# TYPE x gauge\n'
  for bad in $'# HELP x h\nx 1' $'# TYPE x gauge\nx 1' "${x}x 1"$'\nx 1' "${x}"'x{a="1",a="2"} 1' \
    "${x}"'x{a="\q"} 1' "${x}x one" "${x}x 1"$'\n# HELP y h\n# TYPE y gauge\ny 1\nx{a="b"} 2' "${x}x 1 1700000000" \
    $'# HELP 1x h\n# TYPE 1x gauge\n1x 1' "${x}"'x{__a="b"} 1' "${x}x 1"$'\n# HELP x again'; do
    if printf '%s\n' "$bad" | python3 "$WORK/promcheck.py" >/dev/null 2>&1; then fail "the checker accepts: $bad"; fi
  done
  printf '# HELP x a gauge\n# TYPE x gauge\nx{a="q\\"\\\\\\n"} 1.5e3\n' | python3 "$WORK/promcheck.py" >/dev/null ||
    fail "the checker refuses valid input"
  expect_exit 0 klag -b "$BROKERS" -g "$G" -g "$H2" -g "$W" --format prometheus
  python3 "$WORK/promcheck.py" <"$WORK/out" >"$WORK/check" || fail "prometheus output: $(cat "$WORK/check")"
  # Every partition has a lag series, committed on or not (which ones
  # kconsume read its 90 records from depends on the fetches).
  for p in 0 1 2 3; do
    assert_contains "$WORK/out" "kpipe_consumer_lag{group=\"$G\",topic=\"$T\",partition=\"$p\"}"
  done
  assert_eq "$(grep -c '^kpipe_consumer_group_status{' "$WORK/out")" 15 "five status series per group"
  expect_exit 0 klag -b "$BROKERS" --state "$S" --format prometheus
  python3 "$WORK/promcheck.py" <"$WORK/out" >"$WORK/check" || fail "prometheus output: $(cat "$WORK/check")"
  # kafka_exporter's names (section 2c), and a row per topic.
  python3 "$WORK/promcheck.py" <"$WORK/exporter.prom" >"$WORK/check" || fail "kafka_exporter output: $(cat "$WORK/check")"
  for names in kpipe kafka_exporter; do
    expect_exit 0 klag -b "$BROKERS" -g "$G" -g "$H2" -g "$W" --format prometheus --granularity topic --metric-names "$names"
    python3 "$WORK/promcheck.py" <"$WORK/out" >"$WORK/check" || fail "prometheus output by topic, $names: $(cat "$WORK/check")"
  done
fi
