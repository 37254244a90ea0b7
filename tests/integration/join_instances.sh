#!/usr/bin/env bash
# kjoin --state in the instances of a consumer group (kpipe(7), MANY
# INSTANCES): two copies of
#   kconsume -g | kjoin --table kafka:USERS --state | kproduce --transactional
# share one group and one store, once with a lookup join and once as of
# the events' time. Each instance reads the table whole; an as-of join's
# records wait for the table in their source partition's state. While
# records wait, an instance is killed (SIGKILL) and started again at once,
# then one is stopped (its partitions, and the records they hold, move to
# the other) and started again. A read_committed reader of the output then
# sees every event exactly once, with the row the table gives it.
source "$(dirname "$0")/lib.sh"
requires_broker kafka "kbroker (librdkafka's mock cluster) shows read_committed readers aborted records"
start_broker ev-lookup:6 users-lookup:2 out-lookup:6 ev-asof:6 users-asof:2 out-asof:6
seed=${KPIPE_JOIN_SEED:-$RANDOM}
echo "join_instances seed: $seed (rerun with KPIPE_JOIN_SEED=$seed)"

# 12k events over 200 users, one each 10 ms from START, in three pieces.
START=1795946400000
"$KPIPE_SOURCE_DIR/scripts/gen-events" -n 12000 -k 200 -s "$seed" -t "$START" >"$WORK/events.ndjson"
total=$(wc -l <"$WORK/events.ndjson")
split -n l/3 -d "$WORK/events.ndjson" "$WORK/piece."
# The pieces split by bytes, whole lines each: their sizes vary by a line
# or so. Through piece N is how many events pieces 0 to N hold.
through() { cat "$WORK"/piece.0[0-"$1"] | wc -l; }
users() { jq -rn 'range(200) | "u\(. + 1000000 | tostring | .[1:])"'; }

# As of: user U's version V holds from START + 20 s * V - 5 s, so that an
# event at TS has version min(5, floor((TS - START + 5 s) / 20 s)).
version_rows() {
  local v
  for v in "$@"; do
    users | jq -Rc --argjson v "$v" --argjson start "$START" \
      '{user_id: ., v: $v, since: ($start + 20000 * $v - 5000)}'
  done
}
# A key per table partition (twenty keys: both partitions get some) far in
# the future: the table's watermark passes every event.
sentinels() { jq -nc --argjson start "$START" 'range(20) | {user_id: "end\(.)", v: -1, since: ($start + 1e9)}'; }

run_mode() {
  MODE=$1
  T=$(topic "ev-$MODE") U=$(topic "users-$MODE") OUT=$(topic "out-$MODE")
  G=$(group "$MODE")
  S=$(store "$MODE")
  local join=(--table "kafka:$U" -k .value.user_id --as .value.user)
  [[ "$MODE" == lookup ]] || join+=(--as-of .value.ts --table-time .value.since)
  cat >"$WORK/instance.sh" <<PIPE
#!/usr/bin/env bash
name=\$1
shift
err="$WORK/$MODE.\$name.err"
kconsume -b "$BROKERS" -t "$T" -g "$G" --state "$S" --checkpoint-interval 300ms -v -X session.timeout.ms=6000 "\$@" 2>>"\$err" |
  kjoin -b "$BROKERS" ${join[*]} --state "$S" -v 2>>"\$err" |
  kproduce -b "$BROKERS" -t "$OUT" --envelope --keep-partition --transactional --state "$S" -v >/dev/null 2>>"\$err"
PIPE
  produce_table() { kproduce -b "$BROKERS" -t "$U" -k .user_id || fail "kproduce of the table failed"; }
  produce() { kproduce -b "$BROKERS" -t "$T" -k .user_id "$WORK/piece.0$1" || fail "kproduce failed"; }
  at_least_consumed() { (($(consumed) >= $1)); }
  out_count() { kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null | wc -l; }
  all_out() { (($(out_count) >= total)); }

  # The lookup table is there from the start; the versions as of come
  # behind the events, so that records wait for them.
  if [[ "$MODE" == lookup ]]; then
    users | jq -Rc '{user_id: ., name: "name of \(.)"}' | produce_table
  else
    version_rows 0 1 | produce_table
  fi
  start a
  start b
  for i in a b; do wait_for "$MODE instance $i to own partitions" 90 has_partitions "$i"; done

  # Piece 0 (events up to START + 40 s): past version 1's 15 s they wait.
  produce 0
  wait_for "$MODE: piece 0 to be consumed" 90 at_least_consumed "$(through 0)"
  kill_instance a
  start a
  wait_for "the restarted $MODE instance a to own partitions" 60 has_partitions a
  [[ "$MODE" == lookup ]] || version_rows 2 3 | produce_table
  produce 1
  wait_for "$MODE: piece 1 to be consumed" 90 at_least_consumed "$(through 1)"
  # Stopped, a hands its partitions over at a checkpoint: b restores the
  # records they hold.
  stop a
  wait_for "$MODE: a's partitions to move to b" 90 no_orphans 6
  [[ "$MODE" == lookup ]] || { version_rows 4 5; sentinels; } | produce_table
  start a
  produce 2
  wait_for "$MODE: every event to be joined and committed" 150 all_out
  for i in a b; do stop "$i"; done

  cat "$WORK/$MODE".*.err >"$WORK/$MODE.diagnostics"
  ! grep -q 'error' "$WORK/$MODE.diagnostics" || fail "$MODE: errors: $(grep error "$WORK/$MODE.diagnostics" | head -5)"
  if [[ "$MODE" == asof ]]; then
    # Records did wait in a partition's state and were restored with it.
    grep -q "restored [0-9]* records waiting for the table of 'kjoin' for $T" "$WORK/$MODE.diagnostics" ||
      fail "asof: no instance restored waiting records: $(grep -h restored "$WORK/$MODE.diagnostics" | head -5)"
    jq -r --argjson start "$START" \
      '"\(.event_id) \([5, (((.ts - $start + 5000) / 20000) | floor)] | min)"' \
      "$WORK/events.ndjson" | sort >"$WORK/$MODE.want"
    kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null | jq -r '"\(.value.event_id) \(.value.user.v)"' | sort >"$WORK/$MODE.got"
  else
    jq -r '"\(.event_id) name of \(.user_id)"' "$WORK/events.ndjson" | sort >"$WORK/$MODE.want"
    kconsume -b "$BROKERS" -t "$OUT" -e 2>/dev/null | jq -r '"\(.value.event_id) \(.value.user.name)"' | sort >"$WORK/$MODE.got"
  fi
  # Each event once (the reference has each once), with its row.
  assert_eq "$(wc -l <"$WORK/$MODE.want")" "$total" "$MODE: events in the reference"
  assert_files_equal "$WORK/$MODE.want" "$WORK/$MODE.got"
  expect_exit 0 kcheckpoint verify --state "$S"
  echo "join_instances: $MODE ok ($(wc -l <"$WORK/$MODE.got") events, $(sql "$S" "SELECT SUM(epoch - 1) FROM partition_owners") take-overs)"
}

run_mode lookup
run_mode asof
