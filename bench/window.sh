#!/usr/bin/env bash
# kwindow's benchmark (issue 3), run by hand, never by ctest:
#
#   2M events of about 150 bytes (scripts/gen-events), 100k keys, one event
#   every 10 ms of event time (so 2M events span 5.6 hours: 67 five-minute
#   windows of about 26k keys each), up to 2 s out of order;
#   5-minute tumbling windows per user_id, count and sum, --watermark 5s.
#
# Reports the rate of kwindow (best of RUNS, by wall clock and by CPU time),
# the rate of `mlr --ijson --ojson count -g user_id` on the same file, and
# kwindow's peak RSS on those 2M events and on 6M events that span three
# times the event time over the same keys: state is freed as the watermark
# passes, so the two should be about the same.
#
#   bench/window.sh            # uses build/bin; data in $TMPDIR/kpipe-bench-window
#   RUNS=5 bench/window.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KPIPE_BIN:-$root/build/bin}
data=${BENCH_DATA:-${TMPDIR:-/tmp}/kpipe-bench-window}
runs=${RUNS:-3}
keys=100000 step=10 jitter=2000
mkdir -p "$data"

gen() {
  local n=$1 file=$2
  [[ -s $file ]] || "$root/scripts/gen-events" -n "$n" -k "$keys" -i "$step" -j "$jitter" -s 7 >"$file"
}
gen 2000000 "$data/2m.ndjson"
gen 6000000 "$data/6m.ndjson"

kwindow=("$bin/kwindow" --time .ts --key .user_id --tumble 5m --watermark 5s --agg count --agg sum:.amount)

# measure FILE CMD...: "wall user sys maxrss_kb" of one run, output to /dev/null.
measure() {
  local file=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$data/time" "$@" "$file" >/dev/null 2>"$data/stderr"
  cat "$data/time"
}

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", n / s / 1e6 }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "data: $(wc -c <"$data/2m.ndjson") bytes, $(($(wc -c <"$data/2m.ndjson") / 2000000)) bytes per event"

# Correctness first: every event is counted once (the jitter is within the
# watermark delay, so none is late).
total=$("${kwindow[@]}" "$data/2m.ndjson" | awk -F'"count":' '{ split($2, a, ","); s += a[1] } END { print s }')
[[ $total -eq 2000000 ]] || { echo "kwindow counted $total events, not 2000000" >&2; exit 1; }

best_wall=999999 best_cpu=999999
for ((i = 0; i < runs; i++)); do
  read -r wall user sys rss < <(measure "$data/2m.ndjson" "${kwindow[@]}")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  echo "kwindow 2M run $((i + 1)): wall ${wall}s, cpu ${cpu}s, peak RSS ${rss} KB"
  best_wall=$(awk -v a="$best_wall" -v b="$wall" 'BEGIN { print (b < a ? b : a) }')
  best_cpu=$(awk -v a="$best_cpu" -v b="$cpu" 'BEGIN { print (b < a ? b : a) }')
  rss2=$rss
done

read -r mwall muser msys mrss < <(measure "$data/2m.ndjson" mlr --ijson --ojson count -g user_id)
mcpu=$(awk -v u="$muser" -v s="$msys" 'BEGIN { print u + s }')
echo "mlr 2M: wall ${mwall}s, cpu ${mcpu}s, peak RSS ${mrss} KB"

read -r wall6 user6 sys6 rss6 < <(measure "$data/6m.ndjson" "${kwindow[@]}")
echo "kwindow 6M: wall ${wall6}s, peak RSS ${rss6} KB"

echo
echo "| measure | kwindow | mlr count -g user_id | ratio |"
echo "|---|---|---|---|"
echo "| 2M events, wall clock | $(rate 2000000 "$best_wall") M events/s (${best_wall} s) | $(rate 2000000 "$mwall") M events/s (${mwall} s) | $(awk -v a="$mwall" -v b="$best_wall" 'BEGIN { printf "%.0fx", a / b }') |"
echo "| 2M events, CPU time (user+sys) | $(rate 2000000 "$best_cpu") M events/s (${best_cpu} s) | $(rate 2000000 "$mcpu") M events/s (${mcpu} s) | $(awk -v a="$mcpu" -v b="$best_cpu" 'BEGIN { printf "%.0fx", a / b }') |"
echo "| peak RSS, 2M events (5.6 h of event time) | ${rss2} KB | ${mrss} KB | |"
echo "| peak RSS, 6M events (16.7 h, same keys) | ${rss6} KB | | |"
