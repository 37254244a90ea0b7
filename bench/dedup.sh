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

source "$here/bench/lib.sh"
bench_header

lines=2000000
"$gen" -n $lines -r 0.05 >"$tmp/events.ndjson"
echo "# input: $lines lines, $(du -m "$tmp/events.ndjson" | cut -f1) MB, $(sort -u "$tmp/events.ndjson" | wc -l) distinct"

echo "## rate ($runs runs each)"
timed "kdedup -k .event_id" $lines "$bin/kdedup" -k .event_id "$tmp/events.ndjson"
cp "$tmp/out" "$tmp/kdedup.out"
timed "kdedup (whole line)" $lines "$bin/kdedup" "$tmp/events.ndjson"
timed "kdedup --within --time" $lines "$bin/kdedup" -k .event_id --within 1h --time .ts "$tmp/events.ndjson"
runs=${AWK_RUNS:-3} timed "awk '!seen[\$0]++'" $lines awk '!seen[$0]++' "$tmp/events.ndjson"
cmp -s "$tmp/out" "$tmp/kdedup.out" || { echo "kdedup and awk kept different lines" >&2; exit 1; }
timed "cat (reading the file)" $lines cat "$tmp/events.ndjson"

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
