#!/usr/bin/env bash
# kproduce and kconsume against boto3 on Kinesis (kinesalite, in memory, on
# a free loopback port), by CPU time (user + sys) per record: the emulator
# bounds the rate, so wall time says little about the clients. Target: at
# least 5 times less CPU per record than boto3 in each direction, and
# kconsume's peak RSS under 100 MB whatever the backlog.
#
#   bench/kinesis.sh [RECORDS] [RUNS]    (default 100000 records, 3 runs)
#
# RECORDS events of about 150 bytes (scripts/gen-events), partition key
# .user_id, over SHARDS shards (default 4). Each run, alternating:
#   kproduce -t kinesis:S --endpoint URL --region us-east-1 -k .user_id FILE
#   kinesis_boto3.py produce S FILE       (put_records, batches of 500)
# each into a new stream, then, on the stream of kproduce's first run:
#   kconsume -t kinesis:S --endpoint URL --region us-east-1 --from earliest -e
#   kinesis_boto3.py consume S            (get_records round the shards)
# Every stream written is read back and must hold the input's records, and
# both consumers must write every record once (kconsume's values and
# boto3's lines, sorted, equal to the input sorted). Medians of RUNS runs,
# and the same four on an empty input and stream (start-up alone).
#
# Then the backlog: BACKLOG records (default 1000000) in one stream of
# SHARDS shards, read by kconsume once; its peak RSS must stay under 100 MB.
#
# kinesalite answers every GetRecords with MillisBehindLatest 0, full pages
# too: kconsume -e takes a shard for at its tip only on a page that is not
# full (it once ended after one page of each shard: the check below).
#
# kinesalite (npm, pinned below) is installed once into
# $KPIPE_KINESALITE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kpipe/kinesalite/VERSION)
# and stopped when the script exits. Needs node and npm, curl, python3 with
# boto3, jq. KEEP=1 leaves the scratch directory (data, outputs, timings).
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KPIPE_BIN:-$root/build/bin}
records=${1:-100000}
runs=${2:-3}
shards=${SHARDS:-4}
backlog=${BACKLOG:-1000000}
version=3.3.3
cache=${KPIPE_KINESALITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kpipe/kinesalite/$version}
work=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-bench-kinesis.XXXXXX")
kinesalite_pid=
cleanup() {
  if [[ -n $kinesalite_pid ]]; then
    kill "$kinesalite_pid" 2>/dev/null || true
    wait "$kinesalite_pid" 2>/dev/null || true
  fi
  if [[ -n ${KEEP:-} ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
die() {
  echo "bench/kinesis.sh: $*" >&2
  exit 1
}
# shellcheck disable=SC1091 # followed with shellcheck -x
source "$root/bench/lib.sh"
# shellcheck disable=SC1091
source "$root/scripts/free-port.sh"

# Any keys do (no signature is checked); nothing of the caller's AWS
# settings is used or sent.
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_KINESIS
export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_CONFIG_FILE=$work/aws-config AWS_SHARED_CREDENTIALS_FILE=$work/aws-credentials
export AWS_EC2_METADATA_DISABLED=true
for tool in node npm curl jq python3; do command -v "$tool" >/dev/null || die "needs $tool"; done
python3 -c 'import boto3' 2>/dev/null || die "needs python3's boto3 (pip install boto3)"
[[ -x $bin/kconsume && -x $bin/kproduce ]] || die "no kconsume or kproduce in $bin (scripts/build)"

# --- kinesalite -----------------------------------------------------------------

install_kinesalite() {
  [[ -f $cache/.complete && $(cat "$cache/.complete") == "kinesalite@$version" ]] && return
  echo "# installing kinesalite@$version with npm into $cache" >&2
  local tmp=$cache.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # In memory, it needs no leveldown (optional, native).
  npm install --no-audit --no-fund --omit=optional --prefix "$tmp" "kinesalite@$version" >"$tmp/npm.log" 2>&1 ||
    { cat "$tmp/npm.log" >&2; rm -rf "$tmp"; die "cannot install kinesalite@$version"; }
  rm -rf "$cache"
  mv "$tmp" "$cache"
  echo "kinesalite@$version" >"$cache/.complete"
}

# Listens on loopback only (kinesalite's own command listens on every
# interface), prints "ready" once it does, exits 2 when the port is taken.
cat >"$work/kinesalite.js" <<'EOF'
const kinesalite = require(process.argv[2]);
const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 1000 });
server.on("error", (e) => { console.error(e.message); process.exit(e.code === "EADDRINUSE" ? 2 : 1); });
server.listen(+process.argv[3], "127.0.0.1", () => console.log("ready"));
EOF

start_kinesalite() {
  local try port i rc
  for try in 1 2 3; do
    # shellcheck disable=SC2119 # no port to keep clear of
    port=$(free_port)
    # The heap holds every record (1M of them: about 2 GB).
    node --max-old-space-size=8192 "$work/kinesalite.js" "$cache/node_modules/kinesalite" "$port" \
      >"$work/kinesalite.log" 2>&1 </dev/null &
    kinesalite_pid=$!
    for ((i = 0; i < 600; i++)); do
      if grep -qx ready "$work/kinesalite.log"; then
        endpoint=http://127.0.0.1:$port
        return
      fi
      kill -0 "$kinesalite_pid" 2>/dev/null || break
      sleep 0.05
    done
    rc=0
    kill "$kinesalite_pid" 2>/dev/null || true
    wait "$kinesalite_pid" 2>/dev/null || rc=$?
    kinesalite_pid=
    ((rc == 2)) || { cat "$work/kinesalite.log" >&2; die "kinesalite did not start"; }
    echo "# port $port was taken (try $try); another" >&2
  done
  die "cannot start kinesalite: its ports were taken three times"
}

# kin ACTION JSON: one Kinesis call, signed as the clients sign.
kin() {
  curl -sS --fail-with-body -m 30 --aws-sigv4 "aws:amz:us-east-1:kinesis" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "X-Amz-Target: Kinesis_20131202.$1" \
    -H 'Content-Type: application/x-amz-json-1.1' -d "$2" "$endpoint/"
}

create_stream() {
  local i
  kin CreateStream "{\"StreamName\":\"$1\",\"ShardCount\":$2}" >/dev/null
  for ((i = 0; i < 100; i++)); do
    [[ $(kin DescribeStreamSummary "{\"StreamName\":\"$1\"}" | jq -r .StreamDescriptionSummary.StreamStatus) == ACTIVE ]] && return
    sleep 0.1
  done
  die "stream $1 is not ACTIVE after 10 s"
}

delete_stream() { kin DeleteStream "{\"StreamName\":\"$1\"}" >/dev/null; }

# --- measuring ------------------------------------------------------------------

# kargs STREAM: the arguments naming it, in ka.
kargs() { ka=(-t "kinesis:$1" --endpoint "$endpoint" --region us-east-1); }

# rusage.py OUT CMD...: runs CMD and writes "wall user sys maxrss_kb" of
# it (and its children) to OUT, to the microsecond where /usr/bin/time
# gives hundredths: start-up alone is a few milliseconds.
cat >"$work/rusage.py" <<'EOF'
import os, subprocess, sys, time
start = time.monotonic()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
wall = time.monotonic() - start
with open(sys.argv[1], "w") as out:
    print(f"{wall:.6f} {usage.ru_utime:.6f} {usage.ru_stime:.6f} {usage.ru_maxrss}", file=out)
sys.exit(os.waitstatus_to_exitcode(status))
EOF

# measure LABEL CMD...: one run (stdout to $work/out), bounded by 15
# minutes; appends "LABEL wall user sys maxrss_kb" to $work/times.
measure() {
  local label=$1
  shift
  timeout 900 python3 "$work/rusage.py" "$work/t" "$@" >"$work/out" 2>"$work/err" ||
    die "$label failed: $(tail -c 1000 "$work/err")"
  echo "$label $(cat "$work/t")" >>"$work/times"
}

# read_back STREAM N: the values of STREAM's first N records (kconsume),
# sorted, into $work/back; fails when it does not get N within 5 minutes.
read_back() {
  kargs "$1"
  "$bin/kconsume" "${ka[@]}" --from earliest -c "$2" --format value | sort >"$work/back" ||
    die "reading $1 back failed or timed out"
  [[ $(wc -l <"$work/back") -eq $2 ]] || die "stream $1 holds $(wc -l <"$work/back") records, not $2"
}

same_set() { cmp -s "$1" "$2" || die "$3: not the input's records"; }

boto3=(python3 "$root/bench/kinesis_boto3.py")

bench_header
install_kinesalite
start_kinesalite
echo "# kinesalite $version at $endpoint (pid $kinesalite_pid), node $(node --version), boto3 $(python3 -c 'import boto3; print(boto3.__version__)')"

"$root/scripts/gen-events" -n "$records" -k 100000 -s 1 >"$work/events.ndjson"
sort "$work/events.ndjson" >"$work/events.sorted"
: >"$work/empty.ndjson"
: >"$work/times"
echo "# $records records, $(($(stat -c %s "$work/events.ndjson") / records)) bytes each, $shards shards, $runs runs"

# Start-up alone: an empty input, an empty stream.
create_stream empty "$shards"
for ((i = 1; i <= runs; i++)); do
  kargs empty
  measure kproduce-0 "$bin/kproduce" "${ka[@]}" -k .user_id "$work/empty.ndjson"
  measure boto3-produce-0 "${boto3[@]}" --endpoint "$endpoint" --region us-east-1 produce empty "$work/empty.ndjson"
  # -e ends at once on an empty stream (every shard's first page is empty).
  kargs empty
  measure kconsume-0 "$bin/kconsume" "${ka[@]}" --from earliest -e
  measure boto3-consume-0 "${boto3[@]}" --endpoint "$endpoint" --region us-east-1 consume empty
done
delete_stream empty

# Producing: each run into new streams, each read back and checked.
for ((i = 1; i <= runs; i++)); do
  create_stream "kp$i" "$shards"
  kargs "kp$i"
  measure kproduce "$bin/kproduce" "${ka[@]}" -k .user_id "$work/events.ndjson"
  read_back "kp$i" "$records"
  same_set "$work/back" "$work/events.sorted" "kproduce run $i"
  create_stream "bp$i" "$shards"
  measure boto3-produce "${boto3[@]}" --endpoint "$endpoint" --region us-east-1 produce "bp$i" "$work/events.ndjson"
  read_back "bp$i" "$records"
  same_set "$work/back" "$work/events.sorted" "boto3 produce run $i"
  # Only kp1 is read again: the others would only weigh on kinesalite.
  ((i == 1)) || delete_stream "kp$i"
  delete_stream "bp$i"
done

# Consuming kp1, every record once.
for ((i = 1; i <= runs; i++)); do
  kargs kp1
  measure kconsume "$bin/kconsume" "${ka[@]}" --from earliest -e
  jq -c .value "$work/out" | sort >"$work/got"
  same_set "$work/got" "$work/events.sorted" "kconsume run $i"
  measure boto3-consume "${boto3[@]}" --endpoint "$endpoint" --region us-east-1 consume kp1
  sort "$work/out" >"$work/got"
  same_set "$work/got" "$work/events.sorted" "boto3 consume run $i"
done

delete_stream kp1

# The figures: medians of the runs; CPU per record less start-up too.
awk -v n="$records" '
  {
    c = $3 + $4; wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " c
    if (!($1 in lo) || c < lo[$1]) lo[$1] = c
    if (c > hi[$1]) hi[$1] = c
    if ($5 > rss[$1]) rss[$1] = $5
  }
  function median(list,   v, k, i, j, t) {
    k = split(list, v, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((k + 1) / 2)]
  }
  END {
    printf "%-15s %9s %9s %15s %12s %17s %8s\n", "", "wall", "CPU", "CPU runs", "CPU/record", "less start-up", "max RSS"
    split("kproduce boto3-produce kconsume boto3-consume", names, " ")
    for (i = 1; i <= 4; i++) {
      p = names[i]; c = median(cpu[p]); c0 = median(cpu[p "-0"])
      per[p] = c / n * 1e6; net[p] = (c - c0) / n * 1e6
      printf "%-15s %8.2fs %8.3fs %6.3f-%6.3fs %10.2fus %15.2fus %6.0fMB\n", p, median(wall[p]), c, lo[p], hi[p], per[p], net[p], rss[p] / 1024
    }
    for (i = 1; i <= 4; i++) {
      p = names[i]
      q = p "-0"
      printf "%-15s %8.2fs %8.3fs %6.3f-%6.3fs (start-up alone: empty input and stream) %6.0fMB\n", q, median(wall[q]), median(cpu[q]), lo[q], hi[q], rss[q] / 1024
    }
    printf "produce: boto3 / kproduce CPU per record %.1fx (%.1fx less start-up); target 5x\n", per["boto3-produce"] / per["kproduce"], net["boto3-produce"] / net["kproduce"]
    printf "consume: boto3 / kconsume CPU per record %.1fx (%.1fx less start-up); target 5x\n", per["boto3-consume"] / per["kconsume"], net["boto3-consume"] / net["kconsume"]
  }' "$work/times"

# The backlog: kconsume's memory with BACKLOG records waiting.
if ((backlog > 0)); then
  "$root/scripts/gen-events" -n "$backlog" -k 100000 -s 2 >"$work/backlog.ndjson"
  create_stream backlog "$shards"
  : >"$work/times"
  kargs backlog
  measure kproduce "$bin/kproduce" "${ka[@]}" -k .user_id "$work/backlog.ndjson"
  kargs backlog
  measure kconsume "$bin/kconsume" "${ka[@]}" --from earliest -c "$backlog"
  jq -c .value "$work/out" | sort >"$work/got"
  sort "$work/backlog.ndjson" >"$work/backlog.sorted"
  same_set "$work/got" "$work/backlog.sorted" "kconsume of the backlog"
  awk -v n="$backlog" -v shards="$shards" '{
    printf "backlog of %d records over %d shards: %-8s wall %7.2fs CPU %6.3fs (%.2fus/record) max RSS %d MB\n",
      n, shards, $1, $2, $3 + $4, ($3 + $4) / n * 1e6, $5 / 1024 }' "$work/times"
  echo "# kinesalite's own RSS at the end: $(($(ps -o rss= -p "$kinesalite_pid") / 1024)) MB"
fi
