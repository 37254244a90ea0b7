# Sourced by the failover tests: the faults a pipeline on the test's own
# cluster (lib.sh's own_cluster) is run through. The test defines
#   feed N       produces slice N (0..4) of its source events into $SRC
#   caught_up    whether the pipeline has processed every event fed so far
# and has started the pipeline as $PIPELINE (run_pipeline).

# through WHAT STARTED: waits until the pipeline caught up, and says how
# long it took from STARTED (SECONDS at a fault) on.
through() {
  wait_for "the pipeline to catch up $1" 240 caught_up
  echo "caught up $1 $((SECONDS - $2))s after it" >&2
}

# run_faults: slice 0 before any fault; slice 1 while the leader of source
# partition 0 is dead (SIGKILL; one broker of three: with two gone,
# min.insync.replicas=2 rightly refuses every write); slices 2 to 4 during
# a rolling restart, each broker killed and started again in turn (the
# next only once every replica is in sync again: scripts/kafka restart).
# Then stops the pipeline as systemd does (SIGTERM) and fails the test if a
# stage said more than a warning.
run_faults() {
  local t b dead
  feed 0
  run_pipeline
  through "before any fault" 0
  dead=$(kafka_tool leader "$SRC" 0)
  t=$SECONDS
  kafka_tool crash "$dead" 2>/dev/null
  feed 1
  through "with broker $dead killed" "$t"
  kafka_tool restart "$dead" >/dev/null 2>&1 || fail "broker $dead did not come back"
  for b in 1 2 3; do
    t=$SECONDS
    kafka_tool crash "$b" 2>/dev/null
    feed $((b + 1))
    through "with broker $b killed" "$t"
    kafka_tool restart "$b" >/dev/null 2>&1 || fail "broker $b did not come back"
  done
  through "after the rolling restart" "$t"
  kill -TERM -- -"$PIPELINE"
  wait_stopped "the pipeline to stop" 60 "$PIPELINE"
  PIPELINE=""
  grep -v 'warning' "$WORK"/*.err | grep -q . && fail "the pipeline said: $(cat "$WORK"/*.err)"
  sed 's/^/  /' "$WORK"/*.err >&2
}
