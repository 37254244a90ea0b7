#!/usr/bin/env bash
# A real broker crashes (SIGKILL) and restarts on its data, twice, while
# kproduce streams into it: kproduce rides both out (idempotent producer,
# acks=all) and every record lands exactly once: none lost, none twice.
# Then, against the broker dead and against it paused (SIGSTOP: connections
# open, no answer), klag and kcheckpoint sync fail within --timeout with
# one line naming the broker, and exit 1.
source "$(dirname "$0")/lib.sh"
own_kafka
start_broker ev:3
T=$(topic ev)
G=$(group lag)
N=60000

# kproduce reads a FIFO fed in rounds: records keep arriving while the
# broker is down and while it comes back.
mkfifo "$WORK/in"
kproduce -b "$BROKERS" -t "$T" -k .k <"$WORK/in" 2>"$WORK/produce.err" &
producer=$!
exec 7>"$WORK/in"
feed() { awk -v a="$1" -v b="$2" 'BEGIN { for (i = a; i <= b; i++) printf "{\"k\":\"k%d\",\"n\":%d}\n", i % 97, i }' >&7; }
in_topic() { kconsume -b "$BROKERS" -t "$T" -e --format value 2>/dev/null | wc -l; }
at_least() { (($(in_topic) >= $1)); }

feed 1 15000
wait_for "the first records in the topic" 60 at_least 5000
broker crash
feed 15001 30000
broker restart >/dev/null || fail "the broker did not restart: $(tail -5 "$OWN_KAFKA/node1/kafka.log")"
feed 30001 45000
wait_for "records after the first restart" 60 at_least 30001
broker crash
feed 45001 $N
broker restart >/dev/null || fail "the broker did not restart: $(tail -5 "$OWN_KAFKA/node1/kafka.log")"
exec 7>&-
status=0
wait "$producer" || status=$?
assert_eq "$status" 0 "kproduce's exit status ($(cat "$WORK/produce.err"))"
# What kproduce said of the outages: warnings only, one line each.
! grep -v '^kproduce: warning: ' "$WORK/produce.err" | grep -q . || fail "kproduce said: $(cat "$WORK/produce.err")"

kconsume -b "$BROKERS" -t "$T" -e --format value | jq .n | sort -n | uniq -c | awk '$1 != 1' >"$WORK/twice"
[[ ! -s "$WORK/twice" ]] || fail "records in the topic more than once (count n): $(head -3 "$WORK/twice")"
assert_eq "$(in_topic)" "$N" "records in the topic"

# A checkpoint to sync, and a group to ask klag about.
S=$(store state)
kconsume -b "$BROKERS" -t "$T" -e --state "$S" | kcheckpoint commit --state "$S" --passthrough >/dev/null
expect_exit 0 kcheckpoint sync --state "$S" --to-group "$G" -b "$BROKERS"
expect_exit 0 klag -b "$BROKERS" -g "$G"

# fails_within WHAT MS CMD...: CMD exits 1 within MS milliseconds, with one
# line on stderr naming the broker.
fails_within() {
  local what=$1 limit_ms=$2
  shift 2
  local start end
  start=$(date +%s%N)
  expect_exit 1 "$@"
  end=$(date +%s%N)
  local took=$(((end - start) / 1000000))
  ((took <= limit_ms)) || fail "$what took ${took} ms to fail, more than ${limit_ms} ms"
  assert_eq "$(wc -l <"$WORK/err")" 1 "lines $what wrote to stderr ($(cat "$WORK/err"))"
  grep -qF "'$BROKERS'" "$WORK/err" || fail "$what does not name the broker: $(cat "$WORK/err")"
  echo "$what: failed in ${took} ms: $(cat "$WORK/err")"
}
for fault in crash pause; do
  broker "$fault"
  fails_within "klag ($fault)" 5000 klag -b "$BROKERS" -g "$G" --timeout 2s
  fails_within "kcheckpoint sync ($fault)" 5000 kcheckpoint sync --state "$S" --to-group "$G" -b "$BROKERS" --timeout 2s
  if [[ $fault == crash ]]; then
    broker restart >/dev/null || fail "the broker did not restart"
  else
    broker resume
  fi
done
# Back up, both answer again.
expect_exit 0 klag -b "$BROKERS" -g "$G"
echo "broker crash, clients: ok"
