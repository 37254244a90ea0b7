# Shared by the benchmarks (source it after setting tmp and runs, or work
# and bin): the machine line, the timing loop, and a kbroker to measure on.

# bench_header: the date, the machine and its load, as comment lines.
bench_header() {
  echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# timed NAME LINES CMD...: runs CMD $runs times (stdout to $tmp/out, stderr
# to $tmp/err); prints best and median wall and CPU (user + sys) seconds,
# the line rates they give, and the peak RSS. PREPARE, when set, runs
# before each run (not timed).
timed() {
  local name=$1 n=$2
  shift 2
  local i
  : >"$tmp/times"
  for ((i = 0; i < runs; i++)); do
    [[ -z ${PREPARE:-} ]] || eval "$PREPARE"
    /usr/bin/time -o "$tmp/t" -f "%e %U %S %M" "$@" >"$tmp/out" 2>"$tmp/err" ||
      { echo "$name failed: $(head -c 500 "$tmp/err")" >&2; return 1; }
    cat "$tmp/t" >>"$tmp/times"
  done
  local wall cpu rss
  wall=$(awk '{ print $1 }' "$tmp/times" | sort -n | tr '\n' ' ')
  cpu=$(awk '{ print $2 + $3 }' "$tmp/times" | sort -n | tr '\n' ' ')
  rss=$(awk '{ print $4 }' "$tmp/times" | sort -n | tail -1)
  awk -v name="$name" -v n="$n" -v wall="$wall" -v cpu="$cpu" -v rss="$rss" '
    function rate(s) { if (s <= 0) s = 0.01; r = n / s; return r >= 1e6 ? sprintf("%.2fM", r / 1e6) : sprintf("%.0fk", r / 1e3) }
    BEGIN {
      k = split(wall, w, " "); split(cpu, c, " "); m = int((k + 1) / 2)
      printf "%-34s wall best %6.2fs (%s lines/s) median %6.2fs (%s/s) | cpu best %6.2fs (%s/s) median %6.2fs (%s/s) | %d MB\n",
        name, w[1], rate(w[1]), w[m], rate(w[m]), c[1], rate(c[1]), c[m], rate(c[m]), rss / 1024
    }'
}

# start_kbroker TOPIC...: kbroker serving these topics (NAME:PARTITIONS),
# its pid in $broker and, once it serves, its bootstrap address in $B.
# Needs $work (a scratch directory) and $bin (the binaries). Its standard
# output stays open on fd 3: a kbroker that cannot write its log would die.
start_kbroker() {
  local args=() t
  for t in "$@"; do args+=(--topic "$t"); done
  mkfifo "$work/kbroker.out"
  "$bin/kbroker" "${args[@]}" >"$work/kbroker.out" 2>/dev/null &
  broker=$!
  exec 3<"$work/kbroker.out"
  read -r B <&3
}
