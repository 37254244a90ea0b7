#!/usr/bin/env bash
# kupsert against Python's sqlite3 executemany: N upserts over K keys into
# the same table, in batches of the same size, WAL, synchronous=NORMAL and
# the same page cache, on the same SQLite library. Prints a Markdown table.
#
#   bench/upsert.sh [-n ROWS] [-k KEYS] [-b BATCH] [-r RUNS] [-d DIR]
#
# ROWS 500000, KEYS 250000, BATCH 50000 (kupsert's default), RUNS 3; DIR
# (where the databases go) defaults to a temporary directory under $TMPDIR.
# Needs build/bin, python3 and sqlite3.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${KPIPE_BIN:-$here/build/bin}
n=500000 keys=250000 batch=50000 runs=3 dir=""
while getopts "n:k:b:r:d:" opt; do
  case $opt in
    n) n=$OPTARG ;; k) keys=$OPTARG ;; b) batch=$OPTARG ;; r) runs=$OPTARG ;; d) dir=$OPTARG ;;
    *) echo "usage: bench/upsert.sh [-n ROWS] [-k KEYS] [-b BATCH] [-r RUNS] [-d DIR]" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${dir:-${TMPDIR:-/tmp}}/kupsert-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
events=$work/events.ndjson
"$here/scripts/gen-events" -n "$n" -k "$keys" -s 1 >"$events"

# kupsert makes this table; Python makes the same one.
kupsert_run() {
  rm -f "$work/k.db" "$work/k.db-wal" "$work/k.db-shm"
  /usr/bin/time -f "%e %U %S" -o "$work/time" \
    "$bin/kupsert" --db "$work/k.db" --table events --key user_id --batch "$batch" "$events"
  read -r wall user sys <"$work/time"
  echo "$wall $(echo "$user + $sys" | awk '{print $1 + $3}')"
}

# MODE: plain (rows parsed into tuples beforehand: only executemany, a loop
# in C, is timed) or json (parsing the file is timed too, as kupsert's is).
# Opening the database and closing it (a WAL checkpoint) are timed in both,
# as they are in kupsert's run.
python_run() {
  rm -f "$work/p.db" "$work/p.db-wal" "$work/p.db-shm"
  python3 - "$events" "$work/p.db" "$batch" "$1" <<'PY'
import json, resource, sqlite3, sys, time
path, db_path, batch, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cols = ["user_id", "event_id", "ts", "amount", "type", "page", "ua"]
q = lambda c: '"' + c.replace('"', '""') + '"'
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
rows = None
if mode != "json":
    with open(path) as f:
        objs = [json.loads(line) for line in f]
    rows = [tuple(o.get(c) for c in cols) for o in objs]
t0, c0 = time.perf_counter(), cpu()
db = sqlite3.connect(db_path, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=NORMAL")
db.execute("PRAGMA cache_size=-65536")
db.execute("CREATE TABLE events (" + ", ".join(q(c) + (" NOT NULL" if c == "user_id" else "") for c in cols)
           + ', PRIMARY KEY ("user_id")) WITHOUT ROWID')
sql = ("INSERT INTO events (" + ", ".join(map(q, cols)) + ") VALUES (" + ", ".join("?" * len(cols)) + ")"
       + ' ON CONFLICT ("user_id") DO UPDATE SET ' + ", ".join(q(c) + " = excluded." + q(c) for c in cols[1:]))
def batches():
    if rows is not None:
        for i in range(0, len(rows), batch):
            yield rows[i:i + batch]
        return
    chunk = []
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            chunk.append(tuple(o.get(c) for c in cols))
            if len(chunk) == batch:
                yield chunk
                chunk = []
    if chunk:
        yield chunk
for b in batches():
    db.execute("BEGIN IMMEDIATE")
    db.executemany(sql, b)
    db.execute("COMMIT")
db.close()
print(f"{time.perf_counter() - t0:.3f} {cpu() - c0:.3f}")
PY
}

# best and median of RUNS runs: "wall cpu" lines in, "best-rate median-rate cpu-rate" out
summarise() {
  sort -n | awk -v n="$n" '{ wall[NR] = $1; cpu[NR] = $2 }
    END { m = int((NR + 1) / 2); best = wall[1]; bestcpu = cpu[1]
          for (i = 1; i <= NR; i++) if (cpu[i] < bestcpu) bestcpu = cpu[i]
          printf "%d | %d | %d", n / best, n / wall[m], n / bestcpu }'
}

load_before=$(cut -d" " -f1-3 /proc/loadavg)
for ((r = 0; r < runs; r++)); do
  kupsert_run >>"$work/kupsert.times"
  python_run plain >>"$work/plain.times"
  python_run json >>"$work/json.times"
done
rows_k=$(sqlite3 "$work/k.db" 'SELECT COUNT(*) FROM events')
rows_p=$(sqlite3 "$work/p.db" 'SELECT COUNT(*) FROM events')
same=$( [[ "$(sqlite3 "$work/k.db" 'SELECT * FROM events ORDER BY user_id' | md5sum)" == \
           "$(sqlite3 "$work/p.db" 'SELECT * FROM events ORDER BY user_id' | md5sum)" ]] && echo yes || echo NO)

echo "$n upserts over $keys keys ($rows_k distinct rows; kupsert's table equals Python's: $same), batches of $batch, $runs runs"
echo "SQLite $(sqlite3 --version | cut -d' ' -f1) (python3's sqlite3: $(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)')), databases in $(df --output=fstype "$work" | tail -1) ($work)"
echo "load average before: $load_before, after: $(cut -d" " -f1-3 /proc/loadavg); $(nproc) cores"
echo
echo "| program | rows/s, best run (wall) | rows/s, median run (wall) | rows/s per CPU second |"
echo "|---|---|---|---|"
echo "| kupsert (parses the NDJSON too) | $(summarise <"$work/kupsert.times") |"
echo "| python3 executemany, rows parsed beforehand | $(summarise <"$work/plain.times") |"
echo "| python3 json.loads + executemany | $(summarise <"$work/json.times") |"
