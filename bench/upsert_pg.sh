#!/usr/bin/env bash
# kupsert into PostgreSQL against the usual ways of doing it by hand: N
# upserts over K keys into the same table (the one kupsert creates from the
# data), each run from a freshly created table, every result checked to be
# the same table. Prints a Markdown table of rows/s.
#
#   bench/upsert_pg.sh [-n ROWS] [-k KEYS] [-b BATCH] [-r RUNS] [-u URI]
#
# ROWS 500000, KEYS 250000, BATCH 50000 (kupsert's default --batch), RUNS 3.
# Without -u the script starts a PostgreSQL of its own (scripts/postgres:
# fsync off, loopback) and stops it at the end; with -u it uses that server
# and DROPS AND RECREATES ITS TABLE "events".
#
# The methods, each timed as a whole process (connecting included):
# - kupsert --db URI --table events --key user_id --batch BATCH;
# - psycopg2 (Debian's python3-psycopg2, run by Debian's /usr/bin/python3):
#   json.loads of each line, executemany of INSERT ... ON CONFLICT (user_id)
#   DO UPDATE SET every other column, a commit every BATCH rows;
# - psql, the bulk idiom: \copy into a temporary staging table, then one
#   INSERT ... SELECT DISTINCT ON (user_id) ... ORDER BY user_id, seq DESC
#   ... ON CONFLICT (one INSERT may not touch a row twice, so duplicates are
#   folded, the last line winning), all in one transaction. Two inputs:
#   the NDJSON itself (\copy'd a line per row, parsed in SQL by
#   json_to_record: everything timed), and CSV converted beforehand by
#   Python (the conversion not timed; its time is printed apart). And, for
#   reference, the CSV one a transaction per BATCH rows, as kupsert commits.
# Needs build/bin (KPIPE_BIN), Debian 12's PostgreSQL 15 and psql.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${KPIPE_BIN:-$here/build/bin}
n=500000 keys=250000 batch=50000 runs=3 uri=""
while getopts "n:k:b:r:u:" opt; do
  case $opt in
    n) n=$OPTARG ;; k) keys=$OPTARG ;; b) batch=$OPTARG ;; r) runs=$OPTARG ;; u) uri=$OPTARG ;;
    *) echo "usage: bench/upsert_pg.sh [-n ROWS] [-k KEYS] [-b BATCH] [-r RUNS] [-u URI]" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3 # Debian's, whatever python3 comes first on PATH
"$here/scripts/deps" python3-psycopg2 postgresql-client-15
"$python" -c 'import psycopg2' || { echo "$python cannot import psycopg2" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/kupsert-pg-bench.XXXXXX")
started=false
cleanup() {
  if $started; then KPIPE_POSTGRES_STATE=$work/pg "$here/scripts/postgres" down || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
if [[ -z $uri ]]; then
  started=true
  KPIPE_POSTGRES_STATE=$work/pg "$here/scripts/postgres" up --stop-with-parent >"$work/pg.uri"
  uri=$(tail -1 "$work/pg.uri")
fi
cd "$work" # kupsert, should it take the URI for a file name, writes here
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$uri" "$@"; }

events=$work/events.ndjson
# Integer keys, as the issue asks: gen-events' "u000123" becomes 123.
"$here/scripts/gen-events" -n "$n" -k "$keys" -s 1 | sed -E 's/"user_id":"u0*([0-9]+)"/"user_id":\1/' >"$events"
distinct=$(grep -o '"user_id":[0-9]*' "$events" | sort -u | wc -l)

# The table kupsert makes from these events: the key first, then the other
# fields in their order; JSON integers bigint, strings text, the key NOT NULL.
cols=(user_id event_id ts amount type page ua)
types=(bigint text bigint bigint text text text)
key=user_id
joined() { # SEP WORD...: the words joined by SEP
  local sep=$1 out=$2
  shift 2
  for w in "$@"; do out+=$sep$w; done
  echo "$out"
}
quoted=() defs=() sets=() params=()
for i in "${!cols[@]}"; do
  c=\"${cols[i]}\"
  quoted+=("$c") params+=(%s)
  if [[ ${cols[i]} == "$key" ]]; then
    defs+=("$c ${types[i]} NOT NULL")
  else
    defs+=("$c ${types[i]}") sets+=("$c = excluded.$c")
  fi
done
list=$(joined ", " "${quoted[@]}")
create="CREATE TABLE events ($(joined ", " "${defs[@]}"), PRIMARY KEY (\"$key\"))"
conflict="ON CONFLICT (\"$key\") DO UPDATE SET $(joined ", " "${sets[@]}")"

# psycopg2: parsing the file is timed, as kupsert's is.
cat >"$work/upsert_psycopg2.py" <<'PY'
import json, sys
import psycopg2
path, uri, batch, create, insert = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
cols = sys.argv[6].split(",")
db = psycopg2.connect(uri)
cur = db.cursor()
cur.execute(create)
db.commit()
chunk = []
with open(path) as f:
    for line in f:
        o = json.loads(line)
        chunk.append(tuple(o.get(c) for c in cols))
        if len(chunk) == batch:
            cur.executemany(insert, chunk)
            db.commit()
            chunk = []
if chunk:
    cur.executemany(insert, chunk)
    db.commit()
db.close()
PY
insert_py="INSERT INTO events ($list) VALUES ($(joined ", " "${params[@]}")) $conflict"

# psql: the same statement for both inputs, from a staging table whose seq
# numbers the lines in the order \copy reads them.
fold="INSERT INTO events ($list) SELECT DISTINCT ON (\"$key\") $list"
cat >"$work/psql-json.sql" <<EOF
BEGIN;
$create;
CREATE TEMP TABLE stage (seq bigint GENERATED ALWAYS AS IDENTITY, doc text) ON COMMIT DROP;
\\copy stage (doc) FROM '$events' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')
$fold FROM stage, json_to_record(stage.doc::json) AS r($(joined ", " "${defs[@]/ NOT NULL/}"))
  ORDER BY "$key", seq DESC $conflict;
COMMIT;
EOF
stage_csv="CREATE TEMP TABLE stage (seq bigint GENERATED ALWAYS AS IDENTITY, $(joined ", " "${defs[@]/ NOT NULL/}")) ON COMMIT DROP"
cat >"$work/psql-csv.sql" <<EOF
BEGIN;
$create;
$stage_csv;
\\copy stage ($list) FROM '$work/events.csv' WITH (FORMAT csv)
$fold FROM stage ORDER BY "$key", seq DESC $conflict;
COMMIT;
EOF
# The same, a transaction per BATCH rows as kupsert commits, for reference.
{
  echo "$create;"
  for ((first = 0; first < n; first += batch)); do
    cat <<EOF
BEGIN;
$stage_csv;
\\copy stage ($list) FROM '$work/events.csv.$first' WITH (FORMAT csv)
$fold FROM stage ORDER BY "$key", seq DESC $conflict;
COMMIT;
EOF
  done
} >"$work/psql-csv-batched.sql"
convert_start=$(date +%s.%N)
"$python" - "$events" "$work/events.csv" "${cols[@]}" <<'PY'
import csv, json, sys
src, dst, cols = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(src) as f, open(dst, "w", newline="") as out:
    w = csv.writer(out)
    for line in f:
        o = json.loads(line)
        w.writerow([json.dumps(v) if isinstance(v, (dict, list)) else v for v in (o.get(c) for c in cols)])
PY
awk -v dir="$work" -v batch="$batch" '{ f = dir "/events.csv." (NR - 1 - (NR - 1) % batch)
  if (f != last) { if (last != "") close(last); last = f }
  print > f }' "$work/events.csv"
convert=$(echo "$(date +%s.%N) $convert_start" | awk '{ printf "%.2f", $1 - $2 }')

methods=(kupsert kupsert-one psycopg2 psql-json psql-csv psql-csv-batched)
declare -A label=(
  [kupsert]="kupsert --batch $batch (parses the NDJSON)"
  [kupsert-one]="kupsert --batch $n: one transaction, as psql's idiom"
  [psycopg2]="psycopg2: json.loads + executemany, commit every $batch"
  [psql-json]="psql: \\copy NDJSON, json_to_record, INSERT ... SELECT ... ON CONFLICT"
  [psql-csv]="psql: \\copy CSV made beforehand (not timed), INSERT ... SELECT ... ON CONFLICT"
  [psql-csv-batched]="the same, a transaction per $batch rows"
)
declare -A failed=()
command_of() { # METHOD: its command line, in the array cmd
  case $1 in
    kupsert) cmd=("$bin/kupsert" --db "$uri" --table events --key "$key" --batch "$batch" "$events") ;;
    kupsert-one) cmd=("$bin/kupsert" --db "$uri" --table events --key "$key" --batch "$n" "$events") ;;
    psycopg2) cmd=("$python" "$work/upsert_psycopg2.py" "$events" "$uri" "$batch" "$create" "$insert_py" "$(joined , "${cols[@]}")") ;;
    psql-*) cmd=(psql -X -q -v ON_ERROR_STOP=1 "$uri" -f "$work/$1.sql") ;;
  esac
}
# What a run left, to compare: its row count, a sum, a digest of its rows
# (in a fixed column order), and its columns.
check="SELECT count(*), sum(amount), md5(string_agg(ROW($list)::text, E'\\n' ORDER BY \"$key\")) FROM events"
schema="SELECT string_agg(column_name || ' ' || data_type || CASE is_nullable WHEN 'NO' THEN ' NOT NULL' ELSE '' END,
  ', ' ORDER BY ordinal_position) FROM information_schema.columns
  WHERE table_name = 'events' AND table_schema = current_schema()"
reference="" ok=true

source "$here/bench/lib.sh"
bench_header
for ((r = 1; r <= runs; r++)); do
  for m in "${methods[@]}"; do
    [[ -z ${failed[$m]:-} ]] || continue
    sql -c "DROP TABLE IF EXISTS events" -c "CHECKPOINT" 2>/dev/null
    command_of "$m"
    if ! /usr/bin/time -o "$work/time" -f "%e" "${cmd[@]}" >"$work/$m.out" 2>"$work/$m.err"; then
      failed[$m]=$(tail -c 500 "$work/$m.err" | tr '\n' ' ')
      echo "$m failed: ${failed[$m]}" >&2
      continue
    fi
    tail -1 "$work/time" >>"$work/$m.times"
    got=$(sql -c "$check" 2>&1) || got="no table events: $got"
    sql -c "$schema" >"$work/$m.schema" 2>/dev/null || true
    [[ -n $reference ]] || reference=$got
    if [[ $got != "$reference" || ${got%%|*} != "$distinct" ]]; then
      echo "$m, run $r: the table differs: $got (expected $distinct rows, as $reference)" >&2
      ok=false
    fi
  done
done

# best and median of a method's runs: "best median best-rate median-rate"
summary() {
  sort -n "$work/$1.times" | awk -v n="$n" '{ wall[NR] = $1 }
    END { m = int((NR + 1) / 2); b = wall[1] > 0 ? wall[1] : 0.01; d = wall[m] > 0 ? wall[m] : 0.01
          printf "%.2f %.2f %.0f %.0f\n", wall[1], wall[m], n / b, n / d }'
}
declare -A best=() median=()
echo "# $n upserts over $keys keys ($distinct distinct), batches of $batch, $runs runs; PostgreSQL $(sql -c 'SHOW server_version' | cut -d' ' -f1)" \
  "(fsync $(sql -c 'SHOW fsync'), synchronous_commit $(sql -c 'SHOW synchronous_commit'), shared_buffers $(sql -c 'SHOW shared_buffers'))," \
  "psycopg2 $("$python" -c 'import psycopg2; print(psycopg2.__version__.split()[0])') on $("$python" -V)"
table=""
for m in "${methods[@]}"; do
  [[ -s $work/$m.schema ]] || continue
  if [[ -z $table ]]; then
    table=$(cat "$work/$m.schema")
    echo "# table events ($m's): $table; every run's rows the same: $($ok && echo yes || echo NO)"
  elif [[ $(cat "$work/$m.schema") != "$table" ]]; then
    echo "# $m's table differs: $(cat "$work/$m.schema")"
  fi
done
echo "# converting the NDJSON to CSV for the psql CSV methods, not timed in them: ${convert} s"
echo "# load average after: $(cut -d" " -f1-3 /proc/loadavg)"
echo
echo "| method | wall s, best | wall s, median | rows/s, best | rows/s, median |"
echo "|---|---|---|---|---|"
for m in "${methods[@]}"; do
  if [[ -s $work/$m.times ]]; then
    read -r b d rb rd < <(summary "$m")
    best[$m]=$rb median[$m]=$rd
    echo "| ${label[$m]} | $b | $d | $rb | $rd |"
  else
    echo "| ${label[$m]} | failed: ${failed[$m]:-no run} | | | |"
  fi
done
echo
# Each psql idiom against kupsert batched as it is: one transaction against
# one, a batch against a batch.
ratio() { # KUPSERT METHOD TARGET
  [[ -n ${best[$1]:-} && -n ${best[$2]:-} ]] || { echo "$1 / $2: no figure (one did not run)"; return; }
  awk -v k="$1" -v name="$2" -v kb="${best[$1]}" -v km="${median[$1]}" -v b="${best[$2]}" -v d="${median[$2]}" \
    -v t="$3" 'BEGIN { printf "%s / %s: %.2f × (best against best), %.2f × (median against median); the issue asks %s\n",
                            k, name, kb / b, km / d, t }'
}
ratio kupsert psycopg2 ">= 5 ×"
ratio kupsert psql-csv-batched ">= 0.8 × (a transaction per batch on both sides)"
ratio kupsert-one psql-csv ">= 0.8 × (one transaction on both sides)"
ratio kupsert-one psql-json ">= 0.8 ×"
$ok
