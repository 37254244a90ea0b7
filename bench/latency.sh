#!/usr/bin/env bash
# End-to-end latency of the README's pipeline (issue 22): events produced
# at a steady RATE per second (default 50000) for SECONDS (default 20) to a
# kbroker topic of 64 partitions, while the exactly-once pipeline reads
# them live:
#
#   kconsume --state | kdlq guard | kdedup --state | kwindow --state | kupsert --state
#
# once with 1 s checkpoints and once with 200 ms ones. Each checkpoint's
# latency is its completion less the Kafka timestamps of the records it
# covered (kcheckpoint history); printed: over the checkpoints of the
# steady part (the first and last 2 s left out), the median of their p50s,
# the median and the largest of their p99s, and the largest max.
#
#   bench/latency.sh [RATE] [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rate=${1:-50000}
seconds=${2:-20}
bin=${KPIPE_BIN:-$root/build/bin}
export PATH="$bin:$PATH"
for tool in sqlite3 python3 jq; do
  command -v "$tool" >/dev/null || { echo "bench/latency.sh: needs $tool" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/lib.sh"
bench_header
records=$((rate * seconds))
"$root/scripts/gen-events" -n "$records" -k 1000 -r 0.05 >"$work/events.ndjson"

# pace: copies standard input to standard output at RATE lines a second,
# in slices of 5 ms, flushing each.
pace() {
  python3 -c '
import sys, time
rate = int(sys.argv[1]); slice_s = 0.005; per = max(1, int(rate * slice_s))
out = sys.stdout.buffer; start = time.monotonic(); n = 0
for line in sys.stdin.buffer:
    out.write(line); n += 1
    if n % per == 0:
        out.flush()
        ahead = start + n / rate - time.monotonic()
        if ahead > 0: time.sleep(ahead)
out.flush()' "$1"
}

guard=(--require .value.user_id:string --require .value.ts:time)
window=(--time .value.ts --key .value.user_id --tumble 1m --watermark 5s --agg count --agg amount=sum:.value.amount)

# run NAME INTERVAL: the pipeline on a topic of its own while the paced
# producer writes it; stopped (SIGTERM, as systemd stops it) once every
# event is in a complete checkpoint.
run() {
  local name=$1 interval=$2
  local topic=lat-$name S=$work/$name.db
  mkfifo "$work/$name.started"
  kconsume -b "$B" -t "$topic" --state "$S" --checkpoint-interval "$interval" 2>"$work/$name.kconsume.err" |
    kdlq guard "${guard[@]}" --dlq "$work/$name.dead.db" |
    kdedup --key .value.event_id --state "$S" |
    kwindow "${window[@]}" --state "$S" |
    kupsert --db "$S" --table clicks --key window_start,key --state "$S" &
  local pipeline=$!
  pace "$rate" <"$work/events.ndjson" | kproduce -b "$B" -t "$topic" -k .user_id
  # Every event is covered once a checkpoint complete holds each
  # partition's end: poll the store (nothing else says so).
  local deadline=$((SECONDS + 120))
  until [[ $(sqlite3 "$S" "SELECT COALESCE(SUM(records), 0) FROM checkpoints WHERE completed_at IS NOT NULL" 2>/dev/null || echo 0) -ge $records ]]; do
    ((SECONDS < deadline)) || { echo "bench/latency.sh: $name: not every event completed" >&2; exit 1; }
    sleep 0.2
  done
  pkill -TERM -f -- "--state $S --checkpoint-interval" || true
  wait "$pipeline" || true
  kcheckpoint history --state "$S" --format ndjson |
    jq -c 'select(.latency_ms != null) | {at: .emitted_at, p50: .latency_ms.p50, p99: .latency_ms.p99, max: .latency_ms.max, n: .latency_ms.records}' >"$work/$name.latency"
  python3 -c '
import json, sys, statistics, datetime
rows = [json.loads(l) for l in open(sys.argv[1])]
t = lambda r: datetime.datetime.fromisoformat(r["at"].replace("Z", "+00:00")).timestamp()
t0, t1 = t(rows[0]), t(rows[-1])
steady = [r for r in rows if t0 + 2 <= t(r) <= t1 - 2] or rows
p50 = statistics.median(r["p50"] for r in steady)
p99 = [r["p99"] for r in steady]
print("%-16s %3d checkpoints (%d steady): p50 %5.0f ms (median)   p99 %5.0f ms (median), %5.0f ms (worst)   max %5.0f ms   events %d" % (
    sys.argv[2], len(rows), len(steady), p50, statistics.median(p99), max(p99), max(r["max"] for r in steady), sum(r["n"] for r in rows)))
' "$work/$name.latency" "$name ($interval)"
}

start_kbroker lat-1s:64 lat-200ms:64
echo "# $rate events/s for $seconds s ($records events), 64 partitions, README pipeline with --state"
run 1s 1s
run 200ms 200ms
