#!/usr/bin/env bash
# kdlq replay --to kafka:TOPIC is interrupted by a crash of the broker
# (SIGKILL, then a restart on its data): kdlq either rides the crash out or
# exits 1 with one line, and run again until it succeeds, as a supervisor
# would, the replay resumes with no gap and no duplicate: every entry in
# the topic exactly once (by its kpipe.replay.id header), every entry
# marked replayed.
source "$(dirname "$0")/lib.sh"
own_kafka
start_broker fixed:2
F=$(topic fixed)
D=$(store dead)
N=12000

# N dead letters: lines the guard refuses (no .user_id).
awk -v n=$N 'BEGIN { for (i = 1; i <= n; i++) printf "{\"n\":%d,\"pad\":\"%s\"}\n", i, "xxxxxxxxxxxxxxxxxxxxxxxx" }' >"$WORK/lines"
kdlq guard --require .user_id:string --dlq "$D" -q <"$WORK/lines" >/dev/null
assert_eq "$(sql "$D" 'SELECT COUNT(*) FROM dead_letters')" "$N" "dead letters"

replayed() { sql "$D" 'SELECT COUNT(*) FROM dead_letters WHERE replayed_at IS NOT NULL' 2>/dev/null || echo 0; }
at_least() { (($(replayed) >= $1)); }

# Small batches, so that the crash lands mid-replay.
replay() { kdlq replay --dlq "$D" --to "kafka:$F" -b "$BROKERS" --batch 20 --timeout 5s 2>>"$WORK/replay.err"; }
replay &
replayer=$!
wait_for "the replay to be under way" 60 at_least 1000
broker crash
before=$(replayed)
((before < N)) || fail "the replay had ended before the crash: make it longer"
broker restart >/dev/null || fail "the broker did not restart: $(tail -5 "$OWN_KAFKA/node1/kafka.log")"
status=0
wait "$replayer" || status=$?
runs=1 statuses=$status
# The supervisor: again until it succeeds (bounded).
while ((status != 0)); do
  ((status == 1)) || fail "kdlq replay exited $status: $(cat "$WORK/replay.err")"
  ((runs < 5)) || fail "kdlq replay failed $runs times: $(cat "$WORK/replay.err")"
  status=0
  replay || status=$?
  runs=$((runs + 1)) statuses="$statuses $status"
done
if grep -v -E '^kdlq: (warning|error): ' "$WORK/replay.err" | grep -q .; then
  fail "kdlq said more than one-line diagnostics: $(cat "$WORK/replay.err")"
fi

assert_eq "$(replayed)" "$N" "entries marked replayed"
kconsume -b "$BROKERS" -t "$F" -e >"$WORK/fixed.ndjson"
jq -r '.headers[] | select(.[0] == "kpipe.replay.id") | .[1]' "$WORK/fixed.ndjson" | sort | uniq -c |
  awk '$1 != 1' >"$WORK/twice"
[[ ! -s "$WORK/twice" ]] || fail "entries replayed more than once (count id): $(head -3 "$WORK/twice")"
assert_eq "$(wc -l <"$WORK/fixed.ndjson")" "$N" "records in the target topic"
jq -c .value "$WORK/fixed.ndjson" | jq -r .n | sort -n >"$WORK/got"
seq 1 $N >"$WORK/want"
assert_files_equal "$WORK/want" "$WORK/got"
echo "broker crash, kdlq replay: ok (crash after $before of $N entries; runs' exit statuses: $statuses; said: $(paste -sd'|' "$WORK/replay.err"))"
