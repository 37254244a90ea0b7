#!/usr/bin/env bash
# Decoding Avro (issue 21): 1M records of 10 fields in the Confluent wire
# format on kbroker (64 partitions, about 1.2 MB each), schemas from a real
# Schema Registry (scripts/registry). Prints records/s for
#   kconsume -e --value-format avro    (decoded into envelopes)
#   kconsume -e --value-format bytes   (the same records, not decoded)
#   kconsume -e --value-format avro --format value
#   kpipe's codec and python3-avro decoding the same 1M payloads from
#   memory (kcat cannot: Debian's build lacks Avro, "kcat -s value=avro"
#   says so)
# and kproduce --value-format avro encoding them. Checks that kconsume's
# JSON equals python3-avro's decoding of the same bytes.
#
#   bench/avro.sh [RECORDS] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
runs=${2:-5}
bin=${KPIPE_BIN:-$root/build/bin}
work=$(mktemp -d)
tmp=$work
export KPIPE_REGISTRY_STATE=$work/registry
trap '"$root/scripts/registry" down >/dev/null 2>&1 || true; kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/lib.sh"
bench_header

start_kbroker bench:64
reg=$("$root/scripts/registry" up | tail -1)
cat >"$work/event.avsc" <<'AVSC'
{"type": "record", "name": "Event", "namespace": "bench", "fields": [
  {"name": "seq", "type": "long"},
  {"name": "event_id", "type": "string"},
  {"name": "user_id", "type": "string"},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "amount", "type": "int"},
  {"name": "price", "type": "double"},
  {"name": "type", "type": {"type": "enum", "name": "Type", "symbols": ["click", "purchase", "scroll", "view"]}},
  {"name": "page", "type": "string"},
  {"name": "ua", "type": ["null", "string"]},
  {"name": "vip", "type": "boolean"}
]}
AVSC
"$root/scripts/gen-events" -n "$records" -k 100000 |
  jq -c '{seq: (.event_id[1:] | tonumber), event_id, user_id, ts: (.ts / 1000 | floor | todate | sub("Z$"; ".000Z")),
          amount, price: (.amount / 7), type, page, ua: (if .amount % 3 == 0 then null else .ua end),
          vip: (.amount % 2 == 0)}' >"$work/events.ndjson"
t0=$(date +%s.%N)
"$bin/kproduce" -b "$B" -t bench -k .event_id --value-format avro --registry "$reg" \
  --schema "$work/event.avsc" --auto-register "$work/events.ndjson"
t1=$(date +%s.%N)
awk -v n="$records" -v a="$t0" -v b="$t1" 'BEGIN { printf "kproduce --value-format avro: %.2f s, %.0f records/s (encode and produce)\n", b - a, n / (b - a) }'
got=$("$bin/kconsume" -b "$B" -t bench -e --value-format bytes | tee "$work/bytes.ndjson" | wc -l)
[[ $got -eq $records ]] || { echo "kbroker holds $got records, not $records" >&2; exit 1; }
echo "payload: $(jq -r .value_base64 "$work/bytes.ndjson" | head -1000 | base64 -d | wc -c | awk '{ printf "%.0f", $1 / 1000 }') bytes per record on average"

# The decoded values equal python3-avro's reading of the same bytes.
"$bin/kconsume" -b "$B" -t bench -e --value-format avro --registry "$reg" |
  jq -c '.value' | jq -S -c . | sort >"$work/kpipe.sorted"
/usr/bin/python3 "$root/tests/integration/bin/confluent_avro.py" decode "$work/event.avsc" \
  <"$work/bytes.ndjson" | jq -c .value | jq -S -c . | sort >"$work/python.sorted"
cmp -s "$work/kpipe.sorted" "$work/python.sorted" || { echo "kconsume and python3-avro disagree" >&2; exit 1; }
echo "kconsume's JSON equals python3-avro's decoding of all $records records"

timed "kconsume --value-format avro" "$records" "$bin/kconsume" -b "$B" -t bench -e \
  --value-format avro --registry "$reg"
timed "kconsume --value-format bytes" "$records" "$bin/kconsume" -b "$B" -t bench -e \
  --value-format bytes
timed "kconsume avro --format value" "$records" "$bin/kconsume" -b "$B" -t bench -e \
  --value-format avro --registry "$reg" --format value
timed "kconsume (no --value-format)" "$records" "$bin/kconsume" -b "$B" -t bench -e

# Decoding alone, the payloads already in memory: kpipe's codec
# (build/bench/avro_decode), then python3-avro.
jq -r .value_base64 "$work/bytes.ndjson" >"$work/payloads.b64"
id=$("$bin/kconsume" -b "$B" -t bench -c 1 --value-format avro --registry "$reg" | jq .value_schema_id)
for i in $(seq "$runs"); do
  "${KPIPE_BENCH_BIN:-$root/build/bench}/avro_decode" "$work/event.avsc" "$id" <"$work/payloads.b64"
done
/usr/bin/python3 - "$work/event.avsc" "$work/payloads.b64" <<'PY'
import base64, io, sys, time
import avro.io, avro.schema
schema = avro.schema.parse(open(sys.argv[1]).read())
payloads = [base64.b64decode(l) for l in open(sys.argv[2])]
reader = avro.io.DatumReader(schema)
t = time.perf_counter()
for p in payloads:
    reader.read(avro.io.BinaryDecoder(io.BytesIO(p[5:])))
s = time.perf_counter() - t
print("python3-avro DatumReader: %.2f s, %.0f records/s (decoding only, from memory)" % (s, len(payloads) / s))
PY
