#!/usr/bin/env bash
# klag --plot's budget (issue 38): a history of 10,000 samples per partition
# over 100 partitions (1M partition rows) plots in under a second into a
# file under 2 MB, and a single spike sample in it is still drawn.
#
#   bench/plot.sh [BUILD_DIR]    (default: build)
#
# Builds the history with sqlite3 (the tables as klag made them, filled by
# one recursive query), then times RUNS (default 5) runs of
# `klag status --history big.db -g bench --plot out.svg`, by group and with
# --granularity partition, prints the median and the file's size, checks
# with tests/integration/bin/svg_info that the group's line reaches the
# spike, and times the parts alone (build/bench/lag_plot_parts).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin=$build/bin
samples=${SAMPLES:-10000}
parts=${PARTS:-100}
runs=${RUNS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/kpipe-bench-plot.XXXXXX")
# KEEP=1 leaves the history and the pictures in $work, named on exit.
trap '[[ -n ${KEEP:-} ]] && echo "kept $work" >&2 || rm -rf "$work"' EXIT
source "$root/bench/lib.sh"
bench_header

db=$work/big.db
# The tables, migrated by klag itself: an empty file is a new SQLite
# database, which `klag status` migrates before it finds no sample.
: >"$db"
"$bin/klag" status --history "$db" -g bench >/dev/null 2>&1 || true
[[ $(sqlite3 "$db" "SELECT version FROM kpipe_schema WHERE component = 'lag'") -ge 2 ]] ||
  { echo "klag did not create the history's tables" >&2; exit 1; }

# A sample a minute from 2026-12-01; each partition's end grows by 100 a
# sample and its lag wanders between 0 and 49 records (lag in seconds a
# tenth of it), except one sample of one partition: 1,000,000 behind.
t0=1764547200000
spike_sample=$((samples / 2))
spike_partition=42
spike=1000000
start=$(date +%s%N)
sqlite3 "$db" >/dev/null <<SQL
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
BEGIN;
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $samples)
INSERT INTO lag_samples (id, subject_kind, subject, at, members, group_state)
SELECT i, 'group', 'bench', $t0 + (i - 1) * 60000, 3, 'Stable' FROM s;
WITH RECURSIVE p(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM p WHERE n < $parts - 1),
lags AS (
  SELECT s.id AS sample, s.at AS at, p.n AS partition, s.id * 100 + p.n AS end_offset,
         CASE WHEN s.id = $spike_sample AND p.n = $spike_partition THEN $spike
              ELSE (s.id * 7 + p.n * 13) % 50 END AS lag
  FROM lag_samples s CROSS JOIN p ORDER BY s.id, p.n)
INSERT INTO lag_partitions (sample, topic, partition, committed, end_offset, lag_seconds, at)
SELECT sample, 'events', partition, end_offset - lag, end_offset, lag / 10.0, at FROM lags;
COMMIT;
SQL
end=$(date +%s%N)
rows=$(sqlite3 "$db" "SELECT count(*) FROM lag_partitions")
echo "# history: $samples samples x $parts partitions = $rows rows, $(($(stat -c %s "$db") / 1048576)) MiB, made in $(((end - start) / 1000000)) ms"
# What the group's line must reach at the spike: every partition's lag then.
peak=$(sqlite3 "$db" "SELECT SUM(end_offset - committed) FROM lag_partitions WHERE sample = $spike_sample")

# plot NAME ARGS...: RUNS timed runs, the median, and the picture's size.
plot() {
  local name=$1 i start end times=()
  shift
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    "$bin/klag" status --history "$db" -g bench "$@" --plot "$work/out.svg"
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
  done
  printf '%-40s %s ms (median; runs: %s) | %s KiB\n' "$name" \
    "$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
    "${times[*]}" "$(($(stat -c %s "$work/out.svg") / 1024))"
}

plot "klag status --plot (by group)"
# The spike survives thinning: the highest point of the group's line is
# the spike's total, read back through the y axis's tick labels.
"$root/tests/integration/bin/svg_info" "$work/out.svg" >"$work/info.json"
python3 - "$work/info.json" "$peak" <<'PY'
import json, sys
info, peak = json.load(open(sys.argv[1])), float(sys.argv[2])
slope, offset = info["panels"][0]["value_of_y"]
line = next(s for s in info["series"] if s["name"] == "bench" and s["panel"] == 0)
top = max(slope * y + offset for _, y in line["points"])
ok = abs(top - peak) <= 0.02 * peak
print(f"spike: the group's line reaches {top:.0f}, the spike's total is {peak:.0f}: {'drawn' if ok else 'MISSING'}")
sys.exit(0 if ok else 1)
PY
plot "klag status --plot --granularity partition" --granularity partition
"$build/bench/lag_plot_parts" "$db" bench
"$build/bench/lag_plot_parts" "$db" bench partition
