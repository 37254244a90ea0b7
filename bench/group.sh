#!/usr/bin/env bash
# One pipeline on many machines (issue 19, kpipe(7) MANY INSTANCES): what
# keeping state per partition costs, and what a rebalance costs the
# partitions that move.
#
# 1. Speed, on kbroker: the README's pipeline (kconsume | kdedup | kwindow
#    | kupsert, all with --state, checkpoints every second) over 1M events
#    of 1,000 users on 64 partitions (kbroker keeps about 5 MiB of each),
#    as one pipeline (kconsume --state)
#    and as an instance of a group (kconsume -g --state: an engine per
#    partition in kdedup and kwindow, claims and epochs in the store).
# 2. The pause, on a real Apache Kafka (the one scripts/kafka runs with
#    KPIPE_KAFKA_STATE, else one started here), 12 partitions, ROUNDS
#    rounds (default 3), each with a new group and store: two instances
#    read a backlog of the same events; a third joins. Instances rebalance
#    the eager way (issue 34): every partition is handed over, the ones
#    that stay too. For each partition: from the moment its old owner
#    began handing it over (its checkpoint, then the wait for the terminal
#    stage, kconsume -v's "handing N partitions over at checkpoint C took T
#    ms") to its (new or same) owner's "assigned" line after the rebalance,
#    and to that owner's kwindow having restored its windows.
# 3. The restart of an instance (issue 34): in each round, after the join,
#    RESTARTS times (default 4) an instance (a, b, c in turn) is killed
#    with SIGKILL, the whole pipeline, and started again at once with the
#    same command (--instance NAME: the same static member); from its start
#    to the store's partition_owners having rows with its kconsume's pid.
#    And whether the others handed their partitions over meanwhile (a
#    rebalance) or not.
#
#   bench/group.sh [RECORDS] [RUNS]
#   ROUNDS=3 RESTARTS=4 BENCH_PAUSE_ONLY=1 (skips 1.)
#   PIPELINE=transactional: 2. and 3. with kconsume -g | kdedup | kproduce
#   --transactional (into a topic of 12 partitions) for instances (issue 34)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-3}
bin=${KPIPE_BIN:-$root/build/bin}
work=$(mktemp -d)
tmp=$work
export KPIPE_KAFKA_STATE=${KPIPE_KAFKA_STATE:-$work/kafka} KPIPE_BIN=$bin KPIPE_SOURCE_DIR=$root
export PATH=$bin:$PATH
own_kafka=false
broker=""
declare -A sessions # an instance's name: the session its pipeline runs in
cleanup() {
  local sid
  for sid in "${sessions[@]}"; do kill -KILL -- "-$sid" 2>/dev/null || true; done
  [[ -z "$broker" ]] || kill "$broker" 2>/dev/null || true
  if $own_kafka; then "$root/scripts/kafka" down >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
source "$root/bench/lib.sh"
bench_header

"$root/scripts/gen-events" -n "$records" -k 1000 -r 0.03 -j 2000 -s 19 >"$work/events.ndjson"

# --- 1. speed -------------------------------------------------------------------
# (BENCH_PAUSE_ONLY=1 skips it.)
if [[ "${BENCH_PAUSE_ONLY:-}" != 1 ]]; then
start_kbroker bench:64
kproduce -b "$B" -t bench -k .user_id "$work/events.ndjson"
# pipeline STATE [KCONSUME ARGS...]: the README's pipeline to the end of the topic.
pipeline() {
  local s=$1
  shift
  kconsume -b "$B" -t bench -e --state "$s" --checkpoint-interval 1s "$@" |
    kdedup -k .value.event_id --state "$s" |
    kwindow --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
      --agg sum:.value.amount --time-format ms --state "$s" --flush-at-end |
    kupsert --db "$s" --table clicks --key window_start,key --state "$s"
}
n=0
PREPARE='rm -f "$work"/p.db*; n=$((n + 1))'
timed "one pipeline (kconsume --state)" "$records" bash -c "$(declare -f pipeline); B=$B; pipeline $work/p.db"
rows_single=$(sqlite3 "$work/p.db" "SELECT COUNT(*) FROM clicks")
PREPARE='rm -f "$work"/p.db*; n=$((n + 1))'
timed "an instance (kconsume -g --state)" "$records" bash -c "$(declare -f pipeline); B=$B; pipeline $work/p.db -g bench-speed-\$RANDOM"
rows_instance=$(sqlite3 "$work/p.db" "SELECT COUNT(*) FROM clicks")
unset PREPARE
# What of an instance's time is its group's join (kbroker holds a group's
# first join for 3 s, as Kafka's group.initial.rebalance.delay.ms does).
timed "the group join alone (-c 1)" 1 bash -c "kconsume -b $B -t bench -c 1 -g bench-join-\$RANDOM >/dev/null"
echo "# windows: one pipeline $rows_single, an instance $rows_instance"
[[ "$rows_single" == "$rows_instance" ]] || echo "# MISMATCH: the two tables differ in size"
kill "$broker"
broker=""
fi

# --- 2. the pause of the partitions that move --------------------------------------
if ! K=$("$root/scripts/kafka" address 2>/dev/null); then
  "$root/scripts/kafka" up >"$work/kafka.log" 2>&1 || { cat "$work/kafka.log" >&2; exit 1; }
  own_kafka=true
  K=$("$root/scripts/kafka" address)
fi
topic=bench-group-$$
"$root/scripts/kafka" topic "$topic" 12 "$topic-out" 12 >/dev/null
kproduce -b "$K" -t "$topic" -k .user_id "$work/events.ndjson"
echo "# Apache Kafka at $K, $topic: 12 partitions, $records events; the pipeline: ${PIPELINE:-kconsume | kdedup | kwindow | kupsert}"
# instance.sh ROUND NAME: the README's pipeline as instance NAME of round
# ROUND's group and store, its kconsume's and kwindow's diagnostics after
# the time each line was read ($work/ROUND.NAME.consume and .window).
cat >"$work/instance.sh" <<SCRIPT
round=\$1 name=\$2
S=$work/\$round.db
stamp() { while IFS= read -r line; do echo "\$EPOCHREALTIME \$line"; done >>"\$1"; }
kconsume -b "$K" -t "$topic" -g "bench-$topic-\$round" --instance "\$name" --state "\$S" --checkpoint-interval 1s -v \
  2> >(stamp "$work/\$round.\$name.consume") |
  kdedup -k .value.event_id --state "\$S" |
  if [[ "${PIPELINE:-}" == transactional ]]; then
    kproduce -b "$K" -t "$topic-out" --envelope --keep-partition --transactional --state "\$S" >/dev/null
  else
    kwindow -v --time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count \
      --time-format ms --state "\$S" 2> >(stamp "$work/\$round.\$name.window") |
      kupsert --db "\$S" --table clicks --key window_start,key --state "\$S" >/dev/null
  fi
SCRIPT
# start NAME: instance NAME of this round, in a session of its own (one
# SIGKILL reaches its whole pipeline).
start() {
  setsid bash "$work/instance.sh" "$round" "$1" &
  sessions[$1]=$!
}
kconsume_pid() { pgrep -s "${sessions[$1]}" -x kconsume || true; }
sql() { sqlite3 "$S" "$1" 2>/dev/null || echo 0; }
# owns NAME: the partitions the store says NAME's kconsume owns.
owns() {
  local pid
  pid=$(kconsume_pid "$1")
  [[ -n $pid ]] || { echo 0; return; }
  sql "SELECT COUNT(*) FROM partition_owners WHERE pid = $pid"
}
# settled: all 12 partitions owned by live processes.
settled() {
  local n=0 pid
  while read -r pid; do [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done < <(sql "SELECT pid FROM partition_owners")
  ((n == 12))
}
# wait_until SECONDS CHECK...: polls the store or the logs every 20 ms
# (nothing to wait on).
wait_until() {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 50; i++)); do "$@" && return 0; sleep 0.02; done
  echo "# timed out after ${limit}s: $*" >&2
  return 1
}
gone() { [[ -z "$(ps -o stat= -s "${sessions[$1]}" 2>/dev/null | grep -v '^Z')" ]]; }
now() { echo "$EPOCHREALTIME"; }

: >"$work/pauses" >"$work/restarts"
rounds=${ROUNDS:-3}
for ((round = 1; round <= rounds; round++)); do
  S=$work/$round.db
  start a
  start b
  owned_by_two() { (($(sql "SELECT COUNT(DISTINCT pid) FROM partition_owners") == 2)); }
  wait_until 60 owned_by_two
  since=$(now)
  start c
  c_owns() { (($(owns c) > 0)); }
  wait_until 60 c_owns
  wait_until 60 settled
  sleep 2 # the last restores' lines
  until_=$(now)
  # --- the pause: each partition, from its old owner's hand-over start to
  # its assigned line (and its restored windows) after the rebalance.
  awk -v since="$since" -v until_="$until_" -v round="$round" '
    { inst = FILENAME; sub(/.*\//, "", inst); sub(/^[0-9]+\./, "", inst); sub(/\.(consume|window)$/, "", inst) }
    FILENAME ~ /\.consume$/ && / assigned / && $1 < since { owner[$4 $5] = inst }
    FILENAME ~ /\.consume$/ && $1 >= since && $1 < until_ && / handing [0-9]+ partitions over at checkpoint [0-9]+ took [0-9]+ ms/ {
      for (i = 1; i <= NF; ++i) if ($i == "took") took = $(i + 1)
      if (!(inst in began)) { began[inst] = $1 - took / 1000; handed[inst] = $4; tooks = tooks sprintf(" %s %d in %d ms,", inst, $4, took) }
    }
    FILENAME ~ /\.consume$/ && $1 >= since && $1 < until_ && / assigned / { assigned[$4 $5] = $1; now_owner[$4 $5] = inst }
    FILENAME ~ /\.window$/ && $1 >= since && $1 < until_ && / restored / { restored[$6 $7] = $1 }
    END {
      for (p in assigned) {
        if (!(p in owner) || !(owner[p] in began)) { lost++; continue }
        n++; moved += owner[p] != now_owner[p]
        a = assigned[p] - began[owner[p]]; if (a > amax) amax = a; asum += a
        if (p in restored) { r = restored[p] - began[owner[p]]; if (r > rmax) rmax = r }
      }
      printf "# round %d: hand-overs%s %d partitions paused (%d to another instance), %d without a hand-over seen\n", round, tooks, n, moved, lost
      printf "#   pause to assigned: mean %.0f ms, longest %.0f ms", asum / n * 1000, amax * 1000
      printf (rmax > 0 ? "; to restored windows: longest %.0f ms\n" : "\n"), rmax * 1000
      printf "%d %.0f %.0f\n", round, amax * 1000, rmax * 1000 > "/dev/stderr"
    }' "$work/$round".[abc].consume $(ls "$work/$round".[abc].window 2>/dev/null) 2>>"$work/pauses"
  awk -v since="$since" -v until_="$until_" '$1 >= since && $1 < until_ && /handing|assigned|revoked/ {
      f = FILENAME; sub(/.*\//, "", f); sub(/\.consume$/, "", f)
      printf "# %7.0f ms %s %s\n", ($1 - since) * 1000, f, substr($0, index($0, " ") + 1) }' \
    "$work/$round".[abc].consume | sort -k2,2n | awk '/assigned/ { if (++n > 3) next } 1' # the first assigned lines only
  # --- restarts of a killed instance (same command: the same static member).
  names=(a b c)
  for ((k = 0; k < ${RESTARTS:-4}; k++)); do
    name=${names[k % 3]}
    kill -KILL -- "-${sessions[$name]}"
    wait "${sessions[$name]}" 2>/dev/null || true
    wait_until 30 gone "$name"
    others_before=$(cat "$work/$round".[abc].consume | grep -c ' handing ' || true)
    began=$(now)
    start "$name"
    back() { (($(owns "$name") > 0)); }
    wait_until 60 back
    took=$(awk -v a="$began" -v b="$(now)" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
    wait_until 60 settled
    sleep 1
    others=$(($(cat "$work/$round".[abc].consume | grep -c ' handing ' || true) - others_before))
    echo "$round $name $took $(owns "$name") $others" >>"$work/restarts"
    echo "#   restart of $name: partitions back in $took ms ($(owns "$name") of them); hand-overs by the others meanwhile: $others"
  done
  for name in a b c; do kill -TERM "$(kconsume_pid "$name")" 2>/dev/null || true; done
  for name in a b c; do wait "${sessions[$name]}" 2>/dev/null || true; done
  sessions=()
done
sort -k2,2n "$work/pauses" | awk '{ a[NR] = $2; r[NR] = $3 } END {
  printf "# the pause over %d rounds, longest per round, to assigned: median %d ms, worst %d ms\n", NR, a[int((NR + 1) / 2)], a[NR] }'
sort -k3,3n "$work/pauses" | awk '{ r[NR] = $3 } END { if (r[NR] > 0) printf "#   to restored windows: median %d ms, worst %d ms\n", r[int((NR + 1) / 2)], r[NR] }'
sort -k3,3n "$work/restarts" | awk '{ t[NR] = $3; h += $5 } END {
  printf "# restart to partitions back, %d restarts: median %d ms, worst %d ms; hand-overs by the others: %d\n", NR, t[int((NR + 1) / 2)], t[NR], h }'
