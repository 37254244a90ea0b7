#!/usr/bin/env bash
# kjoin --as-of against a Kafka table: each order gets the version of its
# sku's price valid at the order's time (the newest at or before it; a
# tombstone there, or no version yet, is no row), the table's times taken
# from the value (--table-time .value.ts) or the record timestamp (the
# default). Checked against a jq reference, and the same whether the table
# is in Kafka before kjoin starts or produced after kjoin has read the
# whole stream: records wait for the table's watermark. Then the watermark's
# knobs (--table-watermark for table records out of order, --idle-timeout
# for a silent partition, the end of input without it), waiting records
# saved at a checkpoint and restored, and versions pruned behind the
# stream's time (a record needing one is bad input, said as kjoin(1) says).
source "$(dirname "$0")/lib.sh"
start_broker orders:2 p_value:2 p_stamp:2 p_value_late:2 p_stamp_late:2 p_prune:1 p_idle:2 p_disorder:1 p_state:1
O=$(topic orders)

# Times in ms: whole seconds from an hour ago. Table versions at .500 of
# each second, strictly increasing, spread over 12 skus; orders over 14
# skus (s12 and s13 have no versions), out of order across ~205 s, some at
# a version's very time, some as RFC 3339 strings.
BASE=$((($(date +%s) - 3600) * 1000))
jq -nc --argjson base "$BASE" 'range(200) | {i: ., sku: "s\(. * 7 % 12)", ts: ($base + . * 1000 + 500)}' \
  >"$WORK/versions"
# .value.ts form: every version a price.
jq -c '{sku, ts, price: .i}' "$WORK/versions" >"$WORK/value-table.ndjson"
# Record timestamp form: envelopes, every ninth version a tombstone; the
# value's own ts is a decoy.
jq -c '{key: .sku, timestamp: .ts, value: (if .i % 9 == 4 then null else {sku, price: .i, ts: 0} end)}' \
  "$WORK/versions" >"$WORK/stamp-table.ndjson"
# Last, on each partition, a version far later than every order: it takes
# the table's watermark past them all.
late() { jq -nc --argjson t "$((BASE + 10000000))" 'range(2) | {key: "zz\(.)", partition: ., timestamp: $t,
  value: {sku: "zz\(.)", ts: $t, price: -1}}'; }
late >"$WORK/late.ndjson"

jq -nc --argjson base "$BASE" 'range(300) | . as $j |
  (if $j % 10 == 3 then $base + ($j * 37 % 190) * 1000 + 500          # a version time
   else $base + ($j * 7919 % 205000) end) as $t |
  {order: $j, sku: "s\($j % 14)",
   t: (if $j % 10 == 7 then ($t - $t % 1000) / 1000 | todate else $t end)}' >"$WORK/orders.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$O" "$WORK/orders.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$O" -e
assert_eq "$(lines "$WORK/out")" 300 "orders consumed"
# kjoin's stream: the envelopes, order 0 (the earliest) first.
{
  jq -c 'select(.value.order == 0)' "$WORK/out"
  jq -c 'select(.value.order != 0)' "$WORK/out"
} >"$WORK/stream.ndjson"

# reference VERSIONS: the stream joined in jq; VERSIONS holds [sku, time,
# row or null] for each table record.
reference() {
  jq -c --slurpfile v "$1" '
    def ms: if type == "string" then fromdateiso8601 * 1000 else . end;
    (.value.t | ms) as $t | .value.sku as $s
    | ([$v[0][] | select(.[0] == $s and .[1] <= $t)] | max_by(.[1])) as $best
    | .value.price = (if $best == null then null else $best[2] end)' "$WORK/stream.ndjson"
}
jq -s -c 'map([.sku, .ts, .])' "$WORK/value-table.ndjson" >"$WORK/value-versions.json"
reference "$WORK/value-versions.json" >"$WORK/want-value.ndjson"
jq -s -c 'map([.key, .timestamp, .value])' "$WORK/stamp-table.ndjson" >"$WORK/stamp-versions.json"
reference "$WORK/stamp-versions.json" >"$WORK/want-stamp.ndjson"
# The sample has joins, misses before the first version, and (in the
# timestamp form) misses on tombstones.
for form in value stamp; do
  n=$(jq -s 'map(select(.value.price != null)) | length' "$WORK/want-$form.ndjson")
  [[ $n -gt 150 && $n -lt 290 ]] || fail "the $form reference joins $n of 300 orders"
done
[[ $(jq -s '[.[] | select(.value.price == null and (.value.sku == "s12" or .value.sku == "s13" | not))] | length' \
  "$WORK/want-stamp.ndjson") -gt \
  $(jq -s '[.[] | select(.value.price == null and (.value.sku == "s12" or .value.sku == "s13" | not))] | length' \
    "$WORK/want-value.ndjson") ]] || fail "no order falls on a tombstone"

join_args() {  # join_args FORM TOPIC: kjoin's options for a form
  local time=()
  [[ $1 == stamp ]] || time=(--table-time .value.ts)
  echo -b "$BROKERS" --table "kafka:$2" "${time[@]}" --as-of .value.t --key .value.sku --as .value.price \
    --watermark 1h --idle-timeout 60s
}

# --- the table in Kafka before kjoin starts ----------------------------------------

expect_exit 0 kproduce -b "$BROKERS" -t "$(topic p_value)" -k .sku "$WORK/value-table.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic p_value)" --envelope --keep-partition "$WORK/late.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic p_stamp)" --envelope "$WORK/stamp-table.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$(topic p_stamp)" --envelope --keep-partition "$WORK/late.ndjson"
for form in value stamp; do
  # shellcheck disable=SC2046
  expect_exit 0 kjoin $(join_args "$form" "$(topic "p_$form")") "$WORK/stream.ndjson"
  assert_files_equal "$WORK/out" "$WORK/want-$form.ndjson"
  ! grep -q 'error' "$WORK/err" || fail "$form: $(cat "$WORK/err")"
  # Behind kconsume too.
  # shellcheck disable=SC2046
  kconsume -b "$BROKERS" -t "$O" -e 2>"$WORK/consume.err" | kjoin $(join_args "$form" "$(topic "p_$form")") \
    >"$WORK/piped" 2>"$WORK/piped.err" || fail "$form: kconsume | kjoin failed: $(cat "$WORK/piped.err")"
  # (kconsume interleaves the partitions as it reads them: sorted.)
  sort "$WORK/piped" >"$WORK/piped.sorted"
  sort "$WORK/want-$form.ndjson" >"$WORK/want.sorted"
  assert_files_equal "$WORK/piped.sorted" "$WORK/want.sorted"
done

# --- the table produced after kjoin has read the whole stream ------------------------

# kjoin starts on an empty table topic and reads every order; none may pass
# (the table's watermark is behind them all). The table comes in three
# pieces: the first takes the watermark past the first order's time, and
# that order comes out while the rest wait; the late versions release all.
split -n l/3 -d "$WORK/value-table.ndjson" "$WORK/value-piece."
split -n l/3 -d "$WORK/stamp-table.ndjson" "$WORK/stamp-piece."
first_time=$(head -1 "$WORK/stream.ndjson" | jq '.value.t | if type == "string" then fromdateiso8601 * 1000 else . end')
read_all() {  # read_all PID FILE: PID has read FILE to its end on its standard input
  local pos
  kill -0 "$1" 2>/dev/null || fail "kjoin ended early: $(cat "$WORK/late.err")"
  pos=$(awk '$1 == "pos:" { print $2 }' "/proc/$1/fdinfo/0" 2>/dev/null) || return 1
  [[ "$pos" == "$(stat -c %s "$2")" ]]
}
# ended PID: the process has exited (gone, or a zombie not yet reaped).
ended() { [[ ! -e /proc/$1/stat || $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]]; }
for form in value stamp; do
  P=$(topic "p_${form}_late")
  # shellcheck disable=SC2046
  kjoin $(join_args "$form" "$P") <"$WORK/stream.ndjson" >"$WORK/late.out" 2>"$WORK/late.err" &
  pid=$!
  wait_for "kjoin to read the stream ($form)" 30 read_all "$pid" "$WORK/stream.ndjson"
  assert_empty "$WORK/late.out"
  produce=(-k .sku)
  [[ $form == value ]] || produce=(--envelope)
  expect_exit 0 kproduce -b "$BROKERS" -t "$P" "${produce[@]}" "$WORK/$form-piece.00"
  # The first order's time is behind the first piece's newest times.
  last_of_piece=$(tail -1 "$WORK/$form-piece.00" | jq '.ts // .timestamp')
  ((first_time < last_of_piece - 60000)) || fail "the first order is not early enough for this test"
  wait_for "the first order to pass ($form)" 60 test -s "$WORK/late.out"
  (($(lines "$WORK/late.out") < 300)) || fail "$form: every order passed on a third of the table"
  expect_exit 0 kproduce -b "$BROKERS" -t "$P" "${produce[@]}" "$WORK/$form-piece.01"
  expect_exit 0 kproduce -b "$BROKERS" -t "$P" "${produce[@]}" "$WORK/$form-piece.02"
  expect_exit 0 kproduce -b "$BROKERS" -t "$P" --envelope --keep-partition "$WORK/late.ndjson"
  wait_for "kjoin to finish ($form)" 60 ended "$pid"
  status=0
  wait "$pid" || status=$?
  assert_eq "$status" 0 "kjoin's status ($form, table after the stream): $(cat "$WORK/late.err")"
  assert_files_equal "$WORK/late.out" "$WORK/want-$form.ndjson"
  ! grep -q 'error' "$WORK/late.err" || fail "$form: $(cat "$WORK/late.err")"
done

# --- --table-watermark: table records out of order -----------------------------------

# The table's records come a@5000, a@3000, then a late one. Allowed 5 s of
# disorder, the table's watermark trails its newest time by 5 s: the order
# at 4000 waits for a@3000 (as the reference would join it), and is not
# joined on a@5000 alone (no row).
D=$(topic p_disorder)
printf '{"order":1,"sku":"a","t":%d}\n' $((BASE + 4000)) >"$WORK/disorder-stream.ndjson"
kjoin -b "$BROKERS" --table "kafka:$D" --table-time .value.ts --key .sku --as .price --as-of .t --table-watermark 5s \
  --idle-timeout 60s <"$WORK/disorder-stream.ndjson" >"$WORK/disorder.out" 2>"$WORK/disorder.err" &
pid=$!
wait_for "kjoin to read the stream (disorder)" 30 read_all "$pid" "$WORK/disorder-stream.ndjson"
for v in 5000:5 3000:3 20000:20; do
  printf '{"sku":"%s","ts":%d,"price":%d}\n' "$([[ ${v%:*} == 20000 ]] && echo z || echo a)" $((BASE + ${v%:*})) "${v#*:}" |
    kproduce -b "$BROKERS" -t "$D" -k .sku || fail "kproduce to $D failed"
done
wait_for "kjoin to finish (disorder)" 60 ended "$pid"
status=0
wait "$pid" || status=$?
assert_eq "$status" 0 "kjoin's status (disorder): $(cat "$WORK/disorder.err")"
assert_eq "$(cat "$WORK/disorder.out")" \
  "{\"order\":1,\"sku\":\"a\",\"t\":$((BASE + 4000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 3000)),\"price\":3}}" \
  "the order joined within --table-watermark"

# --- --idle-timeout: a silent table partition stops holding records back ----------------

# Only partition 0 of the table gets records (a@1000, b@9000); partition 1
# has none, and would hold every order back until the end of input. With
# --idle-timeout 1s it stops doing so: an order at 5000 comes out while the
# input stays open, with a's row.
I=$(topic p_idle)
printf '%s\n' "{\"sku\":\"a\",\"ts\":$((BASE + 1000)),\"price\":1}" "{\"sku\":\"b\",\"ts\":$((BASE + 9000)),\"price\":2}" |
  kproduce -b "$BROKERS" -t "$I" -k .sku -p 0 || fail "kproduce to $I failed"
mkfifo "$WORK/idle-in"
kjoin -b "$BROKERS" --table "kafka:$I" --table-time .value.ts --key .sku --as .price --as-of .t --idle-timeout 1s \
  <"$WORK/idle-in" >"$WORK/idle.out" 2>"$WORK/idle.err" &
pid=$!
exec 7>"$WORK/idle-in"
printf '{"sku":"a","t":%d}\n' $((BASE + 5000)) >&7
wait_for "the order at 5000 to pass while the input is open" 30 test -s "$WORK/idle.out"
assert_eq "$(cat "$WORK/idle.out")" \
  "{\"sku\":\"a\",\"t\":$((BASE + 5000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 1000)),\"price\":1}}" \
  "the order at 5000"
exec 7>&-
wait "$pid" || fail "kjoin --idle-timeout exited $?: $(cat "$WORK/idle.err")"
assert_empty "$WORK/idle.err"
# Without --idle-timeout, partition 1 holds the orders to the end of input;
# there they are joined with the table as read to its end.
printf '{"sku":"a","t":%d}\n' $((BASE + 5000)) $((BASE + 99000)) >"$WORK/idle-stream.ndjson"
expect_exit 0 kjoin -b "$BROKERS" --table "kafka:$I" --table-time .value.ts --key .sku --as .price --as-of .t \
  "$WORK/idle-stream.ndjson"
assert_eq "$(cat "$WORK/out")" \
  "{\"sku\":\"a\",\"t\":$((BASE + 5000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 1000)),\"price\":1}}
{\"sku\":\"a\",\"t\":$((BASE + 99000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 1000)),\"price\":1}}" \
  "orders joined at the end of input"
assert_empty "$WORK/err"

# --- --state: records waiting for the table are saved at checkpoints ---------------------

# An order waits (the table is at 1000, the order at 5000) when a
# checkpoint line comes: kjoin saves it with the table's versions and
# offsets, and passes the checkpoint line on. Killed then, and the
# checkpoint completed; the table moves on; the next run restores the
# waiting order and joins it (with a@3000, read after the restore) before
# the orders after it.
ST=$(topic p_state)
SS=$(store asof-state)
table_rec() { printf '{"sku":"%s","ts":%d,"price":%d}\n' "$1" $((BASE + $2)) "$3"; }
table_rec a 1000 1 | kproduce -b "$BROKERS" -t "$ST" -k .sku || fail "kproduce to $ST failed"
state_join=(-b "$BROKERS" --table "kafka:$ST" --table-time .value.ts --key .sku --as .price --as-of .t --state "$SS")
mkfifo "$WORK/state-in"
kjoin "${state_join[@]}" <"$WORK/state-in" >"$WORK/state1.out" 2>"$WORK/state1.err" &
pid=$!
exec 7>"$WORK/state-in"
printf '{"sku":"a","t":%d}\n' $((BASE + 5000)) >&7
checkpoint='{"$kpipe":"checkpoint","id":1,"at":1,"offsets":[{"topic":"orders-elsewhere","partition":0,"offset":1}]}'
printf '%s\n' "$checkpoint" >&7
wait_for "the checkpoint line to pass" 30 grep -q '"\$kpipe":"checkpoint"' "$WORK/state1.out"
assert_eq "$(cat "$WORK/state1.out")" "$checkpoint" "what the first run passed"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
exec 7>&-
kcheckpoint commit --state "$SS" --passthrough <"$WORK/state1.out" >"$WORK/commit.out" 2>"$WORK/commit.err" ||
  fail "kcheckpoint commit: $(cat "$WORK/commit.err")"
{ table_rec a 3000 3; table_rec a 6000 6; table_rec z 50000 50; } | kproduce -b "$BROKERS" -t "$ST" -k .sku ||
  fail "kproduce to $ST failed"
printf '{"sku":"a","t":%d}\n' $((BASE + 7000)) >"$WORK/state2.in"
expect_exit 0 kjoin -v "${state_join[@]}" "$WORK/state2.in"
assert_eq "$(cat "$WORK/out")" \
  "{\"sku\":\"a\",\"t\":$((BASE + 5000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 3000)),\"price\":3}}
{\"sku\":\"a\",\"t\":$((BASE + 7000)),\"price\":{\"sku\":\"a\",\"ts\":$((BASE + 6000)),\"price\":6}}" \
  "the restored order, then the new one"
assert_eq "$(head -1 "$WORK/err")" "kjoin: restored 1 rows of 'kjoin' from checkpoint 1 in '$SS'" "the restore line"

# --- versions pruned as the stream's time moves on -----------------------------------

# 1100 versions of one key. A record later than all, then one far behind
# it: within --watermark the old version is still there; with none, it may
# have been pruned, and then the record is bad input that says so (never
# a wrong row).
PR=$(topic p_prune)
jq -nc 'range(1; 1101) | {sku: "a", ts: (. * 1000), price: .}' >"$WORK/prune-table.ndjson"
expect_exit 0 kproduce -b "$BROKERS" -t "$PR" -k .sku "$WORK/prune-table.ndjson"
printf '%s\n' '{"sku":"a","t":2000000}' '{"sku":"a","t":1500}' >"$WORK/behind.ndjson"
want_behind='{"sku":"a","t":2000000,"p":{"sku":"a","ts":1100000,"price":1100}}
{"sku":"a","t":1500,"p":{"sku":"a","ts":1000,"price":1}}'
expect_exit 0 kjoin -b "$BROKERS" --table "kafka:$PR" --table-time .value.ts --key .sku --as .p --as-of .t \
  --watermark 1h "$WORK/behind.ndjson"
assert_eq "$(cat "$WORK/out")" "$want_behind" "a record behind, within --watermark"
status=0
kjoin -b "$BROKERS" --table "kafka:$PR" --table-time .value.ts --key .sku --as .p --as-of .t \
  <"$WORK/behind.ndjson" >"$WORK/out" 2>"$WORK/err" || status=$?
if [[ $status == 65 ]]; then
  assert_eq "$(cat "$WORK/out")" "$(head -1 <<<"$want_behind")" "the record before the one behind"
  grep -qE '^kjoin: error: <stdin>: line 2: event time [^ ]+ is older than the versions kept for key a \(raise --watermark\)$' \
    "$WORK/err" || fail "the error for a pruned version: $(cat "$WORK/err")"
  assert_eq "$(lines "$WORK/err")" 1 "lines on stderr"
else
  assert_eq "$status" 0 "kjoin's status on a record behind the pruned versions: $(cat "$WORK/err")"
  assert_eq "$(cat "$WORK/out")" "$want_behind" "a record behind, versions not pruned"
fi
