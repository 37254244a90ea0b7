#!/usr/bin/env bash
# kconsume against kcat: 1M records of about 150 bytes on kbroker, spread
# over 64 partitions (about 2.3 MB each, under the mock's 5 MiB cap).
# Prints records/s for `kconsume -e` (envelopes), `kcat -C -J -e` (JSON
# with the payload escaped into a string) and `kcat -C -e` (payload only),
# the median of RUNS runs each.
#
#   bench/consume.sh [RECORDS] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-5}
bin=${KPIPE_BIN:-$root/build/bin}
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/lib.sh"

start_kbroker bench:64
"$root/scripts/gen-events" -n "$records" -k 100000 >"$work/events.ndjson"
"$bin/kproduce" -b "$B" -t bench -k .event_id "$work/events.ndjson"
got=$("$bin/kconsume" -b "$B" -t bench -e | wc -l)
[[ $got -eq $records ]] || { echo "kbroker holds $got records, not $records" >&2; exit 1; }

# rate NAME CMD...: records/s, median of $runs runs.
rate() {
  local name=$1 i t
  shift
  for i in $(seq "$runs"); do
    /usr/bin/time -f %e -o "$work/time" "$@" >/dev/null 2>/dev/null
    cat "$work/time"
  done | sort -n | awk -v n="$records" -v name="$name" '{ t[NR] = $1 } END {
    m = t[int((NR + 1) / 2)]; printf "%-28s %8.2f s  %10.0f records/s\n", name, m, n / m }'
}
rate "kconsume -e" "$bin/kconsume" -b "$B" -t bench -e
rate "kcat -C -J -e" kcat -b "$B" -C -t bench -e -q -J
rate "kcat -C -e (payload only)" kcat -b "$B" -C -t bench -e -q
