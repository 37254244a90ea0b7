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
# 3. Many instances (issue 34, kpipe(7) MANY INSTANCES): the exactly-once
#    pipeline `kconsume -g G --state S -e | kproduce --transactional --state
#    S`, and the README's form with kdedup between, as 1, 2 and 3 instances
#    (INSTANCES) on one SQLite store over the same 16-partition source, all
#    started at once; timed until every instance has exited (kconsume -g -e
#    exits at the group's end: every partition's end committed). Each run's
#    output must hold every source record (read_committed), and each
#    count's rate is compared with one instance's.
#
#   bench/transactional.sh [RECORDS] [RUNS]
#   CASES="stage pipelines instances" INSTANCES="1 2 3" (the defaults);
#   KEEP_ERR=1 prints the instances' diagnostics (kconsume -v)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-5}
cases=" ${CASES:-stage pipelines instances} "
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
export B bin work records
PREPARE=fresh

# 1. The stage alone.
if [[ $cases == *" stage "* ]]; then
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
fi

# 2. The pipelines, from the source topic (a new group each run).
if [[ $cases == *" pipelines "* ]]; then
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
fi

# 3. Many instances on one store, the same command each (--instance iK,
# so that the transactional ids, one per instance, are those of the runs
# before). An instance's diagnostics go to $work/OUT.iK.err.
if [[ $cases == *" instances "* ]]; then
cat >"$work/instances.sh" <<'SCRIPT'
# instances.sh N DEDUP: N instances at once; fails if any fails.
n=$1 dedup=$2 pids=() began=$EPOCHREALTIME
for ((k = 1; k <= n; k++)); do
  (
    if [[ $dedup == 1 ]]; then
      "$bin/kconsume" -b "$B" -t source -g "g-$OUT" --instance "i$k" --state "$work/s.db" --checkpoint-interval 1s -e -v |
        "$bin/kdedup" -k .value.event_id --state "$work/s.db" |
        "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition --transactional --transactional-id bench-instances-dedup \
          --state "$work/s.db"
    else
      "$bin/kconsume" -b "$B" -t source -g "g-$OUT" --instance "i$k" --state "$work/s.db" --checkpoint-interval 1s -e -v |
        "$bin/kproduce" -b "$B" -t "$OUT" --envelope --keep-partition --transactional --transactional-id bench-instances \
          --state "$work/s.db"
    fi
  ) 2>"$work/$OUT.i$k.err" &
  pids+=($!)
done
# When every record is in the output: the store's offsets (each
# partition's last complete checkpoint) sum to the source's records
# (polled: nothing to wait on), in $work/$OUT.done, seconds from the start.
for ((i = 0; i < 6000; i++)); do
  [[ $(sqlite3 "$work/s.db" 'SELECT COALESCE(SUM("offset"), 0) FROM offsets' 2>/dev/null) == "$records" ]] && break
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  ((alive)) || break
  sleep 0.05
done
awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$work/$OUT.done"
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for ((k = 1; k <= n; k++)); do
  grep -vE '^kconsume: (instance|assigned|handing|[0-9]+ partitions revoked|consumed [0-9]+ records|joined|group)|^kproduce: transactional id' "$work/$OUT.i$k.err" |
    sed "s/^/i$k: /" >&2 || true
done
exit $status
SCRIPT
# The source's records in OUT, as a read_committed reader sees them.
check_output() {
  local got
  got=$("$bin/kconsume" -b "$B" -t "$OUT" -e --format value | wc -l)
  [[ $got -eq $records ]] || echo "# MISMATCH: $OUT holds $got records, not $records" >&2
}
# The counts' runs alternate (1, 2, 3, 1, 2, 3, ...), so that a machine
# that drifts, or another load, weighs on each count alike.
counts=(${INSTANCES:-1 2 3})
for dedup in 0 1; do
  if [[ $dedup == 1 ]]; then form="kconsume -g | kdedup | kproduce --transactional"; else form="kconsume -g | kproduce --transactional"; fi
  for n in "${counts[@]}"; do : >"$work/times.$n"; done
  for ((r = 0; r < runs; r++)); do
    for n in "${counts[@]}"; do
      fresh
      /usr/bin/time -o "$tmp/t" -f "%e %U %S %M" bash "$work/instances.sh" "$n" "$dedup" >/dev/null 2>"$work/run.err" ||
        { echo "$n× $form failed: $(head -c 800 "$work/run.err")" >&2; continue; }
      echo "$(cat "$tmp/t") $(cat "$work/$OUT.done")" >>"$work/times.$n"
      check_output
      [[ ! -s $work/run.err ]] || sed 's/^/#   /' "$work/run.err"
      [[ -z ${KEEP_ERR:-} ]] || cat "$work"/out-*.err >&2
      # The rebalances the run went through: each hand-over of an
      # instance's partitions at a checkpoint (kconsume -v).
      cat "$work"/out-*.err | awk -v n="$n" -v t="$(cut -d' ' -f1 "$tmp/t")" '
        / handing [0-9]+ partitions over at checkpoint/ { h++; for (i = 1; i <= NF; ++i) if ($i == "took") ms += $(i + 1) }
        END { printf "#   %d× run %.2f s: %d hand-overs (%d ms in all)\n", n, t, h, ms }' >>"$work/handovers"
      rm -f "$work"/out-*.err
    done
  done
  echo "# $form, $runs runs of each count, alternating (wall: until every instance exited;"
  echo "# done: until every record was in the output, the store's offsets summing to the records):"
  # times.N: wall user sys rss done, a line per run.
  for n in "${counts[@]}"; do
    awk -v n="$n" '{ print n, $1, $2 + $3, $5 }' "$work/times.$n"
  done | sort -k1,1n -k2,2n | awk -v r="$records" '
    function sorted(list, v,   k, i, j, x) {
      k = split(list, v, " ")
      for (i = 2; i <= k; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
      return k
    }
    function median(list,   k, v) { k = sorted(list, v); return v[int((k + 1) / 2)] }
    function best(list,   v) { sorted(list, v); return v[1] }
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " $3; done_[$1] = done_[$1] " " $4; if (!($1 in seen)) { seen[$1]; order[++k] = $1 } }
    END {
      one = order[1]
      for (i = 1; i <= k; i++) {
        n = order[i]
        printf "%d instance(s): wall best %.2f s, median %.2f s (%.0fk records/s, %.1f%% of one instance'"'"'s rate); done best %.2f s, median %.2f s (%.0fk records/s, %.1f%%); cpu median %.2f s\n",
          n, best(wall[n]), median(wall[n]), r / median(wall[n]) / 1e3, 100 * median(wall[one]) / median(wall[n]),
          best(done_[n]), median(done_[n]), r / median(done_[n]) / 1e3, 100 * median(done_[one]) / median(done_[n]), median(cpu[n])
        printf "#   walls:%s; dones:%s\n", wall[n], done_[n]
      }
    }'
  cat "$work/handovers"
  : >"$work/handovers"
done
fi
