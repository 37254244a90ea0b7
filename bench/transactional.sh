#!/usr/bin/env bash
# Exactly once into Kafka (issue 18): kproduce --transactional against the
# idempotent kproduce (its default), on the same 1M records of about 150
# bytes, on a real Apache Kafka (scripts/kafka, started here with a state
# of its own, or the one KPIPE_TEST_BOOTSTRAP names). Each run writes to a
# topic of its own (16 partitions), created before it and not timed. The
# runs of a case share one --transactional-id, as the runs of one pipeline
# do: a transactional id new to the cluster costs about 0.4 s more at its
# first start, once in a pipeline's life.
#
# 1. The stage alone, from a file of kconsume envelopes: the transactional
#    run's file has a checkpoint line every CHECKPOINT records, about a
#    second of the idempotent kproduce (measured first), as kconsume's
#    --checkpoint-interval 1s would put them.
# 2. The pipelines a user runs, from a 16-partition source topic:
#      kconsume | kproduce                                    (at least once)
#      kconsume -g --state | kproduce --transactional --state (exactly once)
#    and the README's, with kdedup between (exactly once into Kafka
#    against the at-least-once form: kcheckpoint commit --passthrough before
#    a plain kproduce), checkpoints every second.
#
#   bench/transactional.sh [RECORDS] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-5}
bin=${KPIPE_BIN:-$root/build/bin}
work=$(mktemp -d)
tmp=$work
export KPIPE_KAFKA_STATE=$work/kafka KPIPE_BIN=$bin KPIPE_SOURCE_DIR=$root
own_kafka=false
cleanup() {
  if $own_kafka; then "$root/scripts/kafka" down >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
source "$root/bench/lib.sh"

if [[ -n "${KPIPE_TEST_BOOTSTRAP:-}" ]]; then
  B=$KPIPE_TEST_BOOTSTRAP
else
  own_kafka=true
  B=$("$root/scripts/kafka" up 2>"$work/kafka-up.err" | tail -1) || { cat "$work/kafka-up.err" >&2; exit 1; }
fi
topic() { "$root/scripts/kafka" topic "$1" 16 >/dev/null; }

bench_header
echo "# Apache Kafka at $B, $records records, best and median of $runs runs"

# The source topic, and its records as kconsume envelopes.
topic source
"$root/scripts/gen-events" -n "$records" -k 100000 >"$work/events.ndjson"
"$bin/kproduce" -b "$B" -t source -k .user_id "$work/events.ndjson"
"$bin/kconsume" -b "$B" -t source -e >"$work/envelopes.ndjson"
got=$(wc -l <"$work/envelopes.ndjson")
[[ $got -eq $records ]] || { echo "the source holds $got records, not $records" >&2; exit 1; }

# Each run's output topic (and state store) is new: PREPARE makes them,
# untimed, and the commands read them from the environment.
run_no=0
fresh() {
  run_no=$((run_no + 1))
  export OUT=out-$run_no
  topic "$OUT"
  rm -f "$work"/s.db* "$work"/g.db*
}
export B bin work
PREPARE=fresh

# 1. The stage alone.
timed "kproduce (idempotent)" "$records" \
  sh -c 'exec "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition "$work/envelopes.ndjson"'
idempotent_best=$(awk '{ print $1 }' "$tmp/times" | sort -n | head -1)
per_second=$(awk -v n="$records" -v s="$idempotent_best" 'BEGIN { printf "%d", n / s }')
awk -v every="$per_second" '
  function checkpoint() { id++; printf "{\"$kpipe\":\"checkpoint\",\"id\":%d,\"at\":0,\"group\":\"bench\",\"offsets\":[{\"topic\":\"source\",\"partition\":0,\"offset\":%d}]}\n", id, NR }
  { print }
  NR % every == 0 { checkpoint() }
  END { checkpoint() }
' "$work/envelopes.ndjson" >"$work/with-checkpoints.ndjson"
echo "# a checkpoint line every $per_second records (1 s of the idempotent kproduce's best)"
timed "kproduce --transactional" "$records" \
  sh -c 'exec "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition --transactional --transactional-id bench-stage --state "$work/s.db" "$work/with-checkpoints.ndjson"'

# 2. The pipelines, from the source topic (a new group each run).
timed "kconsume | kproduce" "$records" sh -c '
  "$bin/kconsume" -b "$B" -t source -e |
    "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition'
timed "kconsume | kproduce --transactional" "$records" sh -c '
  "$bin/kconsume" -b "$B" -t source -g "g-$OUT" --state "$work/s.db" --checkpoint-interval 1s -e |
    "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition --transactional --transactional-id bench-pipeline \
      --state "$work/s.db"'
timed "README: ... kdedup | kcheckpoint commit | kproduce" "$records" sh -c '
  "$bin/kconsume" -b "$B" -t source -g "g-$OUT" --state "$work/s.db" --checkpoint-interval 1s -e |
    "$bin/kdedup" -k .value.event_id --state "$work/s.db" |
    "$bin/kcheckpoint" commit --state "$work/s.db" --passthrough |
    "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition'
timed "README: ... kdedup | kproduce --transactional" "$records" sh -c '
  "$bin/kconsume" -b "$B" -t source -g "g-$OUT" --state "$work/s.db" --checkpoint-interval 1s -e |
    "$bin/kdedup" -k .value.event_id --state "$work/s.db" |
    "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition --transactional --transactional-id bench-readme \
      --state "$work/s.db"'
