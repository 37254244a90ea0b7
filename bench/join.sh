#!/usr/bin/env bash
# kjoin's benchmark (issue 20), run by hand, never by ctest:
#
#   bench/join.sh [BUILD_DIR]      (default: build)
#
# A lookup join of 2M kconsume envelopes against a 1M-row table read from a
# file:
#
#   kjoin --table users.ndjson --table-key .id --key .value.user_id --as .value.user
#
# - the table: 1M rows of about 90 bytes, {"id":"u0000123","name":"User 123",
#   "tier":"gold","country":"DE","since":1690000000000}, ids u0000000 to
#   u0999999 in order;
# - the stream: 2M envelopes of about 180 bytes, {"topic":"clicks",
#   "partition":P,"offset":N,"timestamp":T,"key":"u...","value":{"event_id":
#   "e...","user_id":"u...","ts":T,"url":"/p/17"}}, user ids drawn uniformly
#   over the table, 3% of them (u1000000 and up) missing from it (kept
#   with a null row: --on-miss keep, the default);
# - both made once by awk, deterministic, kept in $BENCH_DATA (default
#   $TMPDIR/kpipe-bench-join) for the next run.
#
# Reports, best and median of RUNS runs, by wall clock and by CPU time
# (user + sys), output to /dev/null, reading the table included:
# - kjoin as it runs (its reader thread on the other core), and under
#   `taskset -c 0` (one core: the issue's target, 2M events/s);
# - kjoin on an empty stream (as it runs, and on one core): the cost of
#   reading the table alone, and so what the events alone cost (the best
#   total less the best table alone);
# - peak RSS against the table file's size (the target: at most 2 x);
# - the peers, PEER_RUNS runs (default 1), on the same files, to /dev/null:
#   jq 1.6 in its fastest form found (the index built once by reduce and
#   setpath, then `inputs`; jq's own INDEX() is quadratic in 1.6 and does not
#   finish), and `mlr join` (Debian's miller, installed by scripts/deps when
#   missing, skipped when it cannot be): flatten, an unsorted join keeping
#   unpaired stream records (--ur) with the row's fields prefixed value.user.,
#   unflatten. mlr's row lacks the id (it is the join field, kept as
#   .value.user_id), so it does a little less than kjoin and jq. The faster
#   peer is the one the ratio uses (the issue's target: 20 x).
#
# Checks first: kjoin's -v summary counts the misses the data has, and on the
# first SAMPLE events (default 1000) kjoin's output is jq's byte for byte,
# and its .value.user (less .id) is mlr's, both normalised by jq -cS; with
# CHECK_ALL=1, kjoin's whole output is jq's (a checksum of each; 30 s more).
#
#   RUNS=5 bench/join.sh           # uses build/bin
#   PEERS=jq bench/join.sh         # jq only (PEERS=none or PEER_RUNS=0: no peer)
#   ROWS=10000 EVENTS=20000 bench/join.sh   # a quick try of the script
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bin=$build/bin
data=${BENCH_DATA:-${TMPDIR:-/tmp}/kpipe-bench-join}
runs=${RUNS:-5}
peer_runs=${PEER_RUNS:-1}
peers=${PEERS:-jq mlr}
# PEER_RUNS=0 measures no peer, as PEERS=none.
[[ $peers == none || $peer_runs == 0 ]] && peers=""
sample=${SAMPLE:-1000}
rows=${ROWS:-1000000} events=${EVENTS:-2000000}
mkdir -p "$data"

[[ -x $bin/kjoin ]] || { echo "no $bin/kjoin: build first (scripts/build)" >&2; exit 1; }
source "$root/bench/lib.sh"

table=$data/users-$rows.ndjson stream=$data/events-$events-$rows.ndjson
if [[ ! -s $table ]]; then
  awk -v n="$rows" 'BEGIN {
    split("gold silver bronze free", tiers, " "); split("DE FR US GB JP BR IN ES IT NL", cc, " ")
    srand(11)
    for (i = 0; i < n; i++)
      printf "{\"id\":\"u%07d\",\"name\":\"User %d\",\"tier\":\"%s\",\"country\":\"%s\",\"since\":%.0f}\n",
        i, i, tiers[1 + int(rand() * 4)], cc[1 + int(rand() * 10)], 1690000000000 + int(rand() * 3e10)
  }' >"$table.tmp"
  mv "$table.tmp" "$table"
fi
if [[ ! -s $stream ]]; then
  awk -v n="$events" -v rows="$rows" -v miss=0.03 'BEGIN {
    srand(7); t = 1795946400000
    for (i = 0; i < n; i++) {
      u = rand() < miss ? rows + int(rand() * rows) : int(rand() * rows)
      ts = t + i * 5
      printf "{\"topic\":\"clicks\",\"partition\":%d,\"offset\":%d,\"timestamp\":%.0f,\"key\":\"u%07d\",\"value\":{\"event_id\":\"e%09d\",\"user_id\":\"u%07d\",\"ts\":%.0f,\"url\":\"/p/%d\"}}\n",
        i % 4, int(i / 4), ts + 3, u, i, u, ts, int(rand() * 500)
    }
  }' >"$stream.tmp"
  mv "$stream.tmp" "$stream"
fi
: >"$data/empty.ndjson"
head -n "$sample" "$stream" >"$data/sample.ndjson"
table_bytes=$(wc -c <"$table")
misses=$(awk -F'"user_id":"u' -v rows="$rows" '$2 + 0 >= rows { m++ } END { print m + 0 }' "$stream")

kjoin=("$bin/kjoin" --table "$table" --table-key .id --key .value.user_id --as .value.user)
jq_join=(jq -nc --slurpfile t "$table"
  '(reduce $t[] as $r ({}; setpath([$r.id]; $r))) as $idx | inputs | setpath(["value","user"]; $idx[.value.user_id])')
mlr_join=(mlr --ijson --ojsonl flatten "then" join -j value.user_id -l id -r value.user_id --ur --lp value.user.
  -f "$table" "then" unflatten)

if [[ " $peers " == *" mlr "* ]] && ! command -v mlr >/dev/null; then
  "$root/scripts/deps" miller || true
  command -v mlr >/dev/null || { echo "# no mlr (Debian's miller could not be installed): mlr skipped"; peers=${peers//mlr/}; }
fi

bench_header
echo "# table: $rows rows, $table_bytes bytes ($(awk -v b="$table_bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)"
echo "# stream: $events events, $(wc -c <"$stream") bytes, $misses ($(awk -v m="$misses" -v n=$events 'BEGIN { printf "%.1f", 100 * m / n }')%) with no row"
echo "# $(jq --version)$(command -v mlr >/dev/null && echo ", $(mlr --version)")"

# measure N OUT CMD...: runs CMD N times, standard output to OUT, and sets
# wall, wall_med, cpu, cpu_med (best and median, seconds) and rss (the
# largest peak RSS, KB).
measure() {
  local n=$1 out=$2 i
  shift 2
  : >"$data/times"
  for ((i = 0; i < n; i++)); do
    /usr/bin/time -o "$data/t" -f "%e %U %S %M" "$@" >"$out" 2>"$data/err" ||
      { echo "failed: $*: $(head -c 500 "$data/err")" >&2; exit 1; }
    cat "$data/t" >>"$data/times"
  done
  read -r wall wall_med < <(awk '{ print $1 }' "$data/times" | sort -n | awk '{ a[NR] = $1 } END { print a[1], a[int((NR + 1) / 2)] }')
  read -r cpu cpu_med < <(awk '{ print $2 + $3 }' "$data/times" | sort -n | awk '{ a[NR] = $1 } END { print a[1], a[int((NR + 1) / 2)] }')
  rss=$(awk '{ print $4 }' "$data/times" | sort -n | tail -1)
}
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 0.01; r = n / s; printf(r >= 1e6 ? "%.2fM" : "%.0fk", r >= 1e6 ? r / 1e6 : r / 1e3) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
# report NAME: one line of the last measure's figures.
report() {
  printf "%-30s wall best %6.2fs (%s events/s) median %6.2fs | cpu best %6.2fs (%s/s) median %6.2fs | peak RSS %4d MB (%s x the table file)\n" \
    "$1" "$wall" "$(rate $events "$wall")" "$wall_med" "$cpu" "$(rate $events "$cpu")" "$cpu_med" $((rss / 1024)) \
    "$(awk -v r="$rss" -v b="$table_bytes" 'BEGIN { printf "%.2f", r * 1024 / b }')"
}

echo "## checks"
sum=$("${kjoin[@]}" -v "$stream" 2>"$data/summary" | cksum)
summary=$(tail -1 "$data/summary")
echo "$summary"
want="kjoin: $events records in, $((events - misses)) joined, $misses missed, 0 dropped; table $rows rows"
[[ $summary == "$want" ]] || { echo "expected: $want" >&2; exit 1; }
if [[ ${CHECK_ALL:-0} == 1 ]]; then
  [[ $("${jq_join[@]}" "$stream" | cksum) == "$sum" ]] || { echo "kjoin's and jq's outputs differ" >&2; exit 1; }
  echo "jq: the same $events lines, byte for byte (cksum $sum)"
fi
"${kjoin[@]}" "$data/sample.ndjson" >"$data/kjoin.sample"
if [[ " $peers " == *" jq "* ]]; then
  "${jq_join[@]}" "$data/sample.ndjson" >"$data/jq.sample"
  cmp -s "$data/kjoin.sample" "$data/jq.sample" || { echo "kjoin and jq differ on the first $sample events" >&2; exit 1; }
  jq -cS .value.user "$data/kjoin.sample" >"$data/kjoin.users"
  jq -cS .value.user "$data/jq.sample" | cmp -s - "$data/kjoin.users" || { echo "kjoin's and jq's rows differ" >&2; exit 1; }
  echo "jq: the same $sample lines, byte for byte ($(grep -c '"user":null' "$data/kjoin.sample") of them with no row)"
fi
if [[ " $peers " == *" mlr "* ]]; then
  "${mlr_join[@]}" "$data/sample.ndjson" >"$data/mlr.sample"
  [[ $(wc -l <"$data/mlr.sample") -eq $sample ]] || { echo "mlr wrote $(wc -l <"$data/mlr.sample") lines, not $sample" >&2; exit 1; }
  jq -cS '.value.user // null' "$data/mlr.sample" >"$data/mlr.users"
  jq -cS '.value.user | if . == null then null else del(.id) end' "$data/kjoin.sample" |
    cmp -s - "$data/mlr.users" || { echo "kjoin's and mlr's rows differ on the first $sample events" >&2; exit 1; }
  echo "mlr: the same $sample rows in the same order (.value.user less .id, normalised by jq -cS)"
fi

echo "## kjoin ($runs runs each, output to /dev/null)"
measure "$runs" /dev/null "${kjoin[@]}" "$stream"
report "kjoin"
k_wall=$wall k_cpu=$cpu k_rss=$rss
measure "$runs" /dev/null taskset -c 0 "${kjoin[@]}" "$stream"
report "kjoin, taskset -c 0"
k1_wall=$wall
# report_table NAME: the last measure's figures, for the table alone.
report_table() {
  printf "%-30s wall best %6.2fs median %6.2fs | cpu best %6.2fs median %6.2fs | peak RSS %4d MB (%s x the table file)\n" \
    "$1" "$wall" "$wall_med" "$cpu" "$cpu_med" $((rss / 1024)) "$(awk -v r="$rss" -v b="$table_bytes" 'BEGIN { printf "%.2f", r * 1024 / b }')"
}
measure "$runs" /dev/null "${kjoin[@]}" "$data/empty.ndjson"
report_table "kjoin, the table alone"
t_wall=$wall t_rss=$rss
measure "$runs" /dev/null taskset -c 0 "${kjoin[@]}" "$data/empty.ndjson"
report_table "kjoin, table alone, taskset"
t1_wall=$wall

peer="" p_wall=0
for p in $peers; do
  echo "## $p ($peer_runs run(s), output to /dev/null)"
  case $p in
    jq) measure "$peer_runs" /dev/null "${jq_join[@]}" "$stream" ;;
    mlr) measure "$peer_runs" /dev/null "${mlr_join[@]}" "$stream" ;;
    *) echo "unknown peer $p" >&2; exit 2 ;;
  esac
  report "$p"
  eval "${p}_wall=$wall ${p}_cpu=$cpu ${p}_rss=$rss"
  if [[ -z $peer ]] || awk -v a="$wall" -v b="$p_wall" 'BEGIN { exit !(a < b) }'; then
    peer=$p p_wall=$wall
  fi
done

echo
echo "| measure | kjoin | $(for p in $peers; do printf '%s | ' "$p"; done)ratio to the faster peer |"
echo "|---|---|$(for p in $peers; do printf -- '---|'; done)---|"
row() { # LABEL KJOIN_SECONDS (peer seconds from variables SUFFIX)
  local label=$1 k=$2 suffix=$3 line p v
  line="| $label | $(rate $events "$k") events/s ($k s) |"
  for p in $peers; do
    v=$(eval echo "\$${p}_$suffix")
    line+=" $(rate $events "$v") events/s ($v s) |"
  done
  if [[ -n $peer ]]; then
    v=$(eval echo "\$${peer}_$suffix")
    line+=" $(ratio "$v" "$k") x ($peer) |"
  else
    line+=" |"
  fi
  echo "$line"
}
n_ev=$(awk -v n=$events 'BEGIN { printf(n >= 1e6 ? "%gM" : "%gk", n >= 1e6 ? n / 1e6 : n / 1e3) }')
n_rows=$(awk -v n="$rows" 'BEGIN { printf(n >= 1e6 ? "%gM" : "%gk", n >= 1e6 ? n / 1e6 : n / 1e3) }')
row "$n_ev events, wall clock" "$k_wall" wall
row "$n_ev events, wall clock, kjoin under taskset -c 0" "$k1_wall" wall
row "$n_ev events, CPU time (user + sys)" "$k_cpu" cpu
blank=$(for p in $peers; do printf ' |'; done)
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
echo "| the $n_ev events alone (best total less the best reading of the table), wall clock | $(rate $events "$(minus "$k_wall" "$t_wall")") events/s ($(minus "$k_wall" "$t_wall") s); on one core $(rate $events "$(minus "$k1_wall" "$t1_wall")") events/s ($(minus "$k1_wall" "$t1_wall") s) |$blank |"
echo "| reading the $n_rows-row table alone (empty stream), wall clock | $t_wall s; on one core $t1_wall s |$blank |"
echo "| peak RSS | $((k_rss / 1024)) MB ($(awk -v r="$k_rss" -v b="$table_bytes" 'BEGIN { printf "%.2f", r * 1024 / b }') x the table's $(awk -v b="$table_bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB; table alone $((t_rss / 1024)) MB) |$(for p in $peers; do printf ' %d MB |' $(($(eval echo "\${${p}_rss:-0}") / 1024)); done) |"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
