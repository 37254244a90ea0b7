#!/usr/bin/env bash
# kdedup's benchmark (issue 4), run by hand, never by ctest:
#
#   bench/dedup.sh [BUILD_DIR]     (default: build)
#
# - rate on 2M lines with 5% repeats (scripts/gen-events -r 0.05) keyed by
#   .event_id, against awk '!seen[$0]++' on the same file (gen-events
#   repeats are whole-line copies, so both must keep the same lines: the
#   script checks it);
# - bytes per remembered key at 3M and 10M distinct keys, from peak RSS
#   (/usr/bin/time -f %M), hashed and with --within/--time (which keeps a
#   time per key), the process's whole footprint divided by the keys.
#
# Each timed run is repeated; the best and the median are printed, as wall
# clock and as CPU time (user + sys), since a shared machine inflates the
# first far more than the second.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
bin=$build/bin
gen=$here/scripts/gen-events
runs=${RUNS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kdedup-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

[[ -x $bin/kdedup ]] || { echo "no $bin/kdedup: build first" >&2; exit 1; }

echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

lines=2000000
"$gen" -n $lines -r 0.05 >"$tmp/events.ndjson"
echo "# input: $lines lines, $(du -m "$tmp/events.ndjson" | cut -f1) MB, $(sort -u "$tmp/events.ndjson" | wc -l) distinct"

# timed NAME CMD...: runs CMD $runs times (stdout to $tmp/out), prints
# best and median of wall and CPU seconds and the rates they give.
timed() {
  local name=$1
  shift
  local i
  : >"$tmp/times"
  for ((i = 0; i < runs; i++)); do
    /usr/bin/time -o "$tmp/t" -f "%e %U %S %M" "$@" >"$tmp/out"
    cat "$tmp/t" >>"$tmp/times"
  done
  local wall cpu rss
  wall=$(awk '{ print $1 }' "$tmp/times" | sort -n | tr '\n' ' ')
  cpu=$(awk '{ print $2 + $3 }' "$tmp/times" | sort -n | tr '\n' ' ')
  rss=$(awk '{ print $4 }' "$tmp/times" | sort -n | tail -1)
  awk -v name="$name" -v n=$lines -v wall="$wall" -v cpu="$cpu" -v rss="$rss" 'BEGIN {
    k = split(wall, w, " "); split(cpu, c, " "); m = int((k + 1) / 2)
    printf "%-26s wall best %.2fs (%.2fM lines/s) median %.2fs (%.2fM/s) | cpu best %.2fs (%.2fM/s) median %.2fs (%.2fM/s) | %d MB\n",
      name, w[1], n / w[1] / 1e6, w[m], n / w[m] / 1e6, c[1], n / c[1] / 1e6, c[m], n / c[m] / 1e6, rss / 1024
  }'
}

echo "## rate ($runs runs each)"
timed "kdedup -k .event_id" "$bin/kdedup" -k .event_id "$tmp/events.ndjson"
cp "$tmp/out" "$tmp/kdedup.out"
timed "kdedup (whole line)" "$bin/kdedup" "$tmp/events.ndjson"
timed "kdedup --within --time" "$bin/kdedup" -k .event_id --within 1h --time .ts "$tmp/events.ndjson"
runs=${AWK_RUNS:-3} timed "awk '!seen[\$0]++'" awk '!seen[$0]++' "$tmp/events.ndjson"
cmp -s "$tmp/out" "$tmp/kdedup.out" || { echo "kdedup and awk kept different lines" >&2; exit 1; }
timed "cat (reading the file)" cat "$tmp/events.ndjson"

echo "## memory: peak RSS per remembered key (distinct keys, no repeats)"
/usr/bin/time -o "$tmp/t" -f "%M" "$bin/kdedup" -k .event_id </dev/null >/dev/null
base=$(cat "$tmp/t")
echo "baseline (no input): $((base / 1024)) MB"
for n in 3000000 10000000; do
  for mode in hashed within; do
    args=(-k .event_id)
    [[ $mode == within ]] && args+=(--within 30d --time .ts)
    "$gen" -n $n | /usr/bin/time -o "$tmp/t" -f "%M" "$bin/kdedup" "${args[@]}" -v 2>"$tmp/err" >/dev/null
    kb=$(tail -1 "$tmp/t")
    keys=$(grep -oE '[0-9]+ keys remembered' "$tmp/err" | cut -d' ' -f1)
    awk -v n="$n" -v mode="$mode" -v kb="$kb" -v base="$base" -v keys="$keys" 'BEGIN {
      printf "%9d keys %-7s peak %4d MB: %.1f bytes/key (%.1f above the baseline)\n",
        keys, mode, kb / 1024, kb * 1024 / keys, (kb - base) * 1024 / keys }'
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
