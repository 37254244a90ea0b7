#!/usr/bin/env bash
# Avro in the Confluent wire format against a real Schema Registry
# (kpipe(7), SCHEMA REGISTRY). Records framed and encoded by an independent
# implementation (python3-avro) decode to the plain JSON kpipe promises, on
# every Avro type and logical type; what kproduce encodes, python3-avro
# decodes to the input; a record read and produced again keeps its bytes;
# a record written with an old schema reads with that schema after the
# subject gained a field; hostile bytes go to the dead-letter store byte
# for byte and a replay gives them back unchanged; a copy of a topic needs
# no subject of its own, for values and keys.
source "$(dirname "$0")/lib.sh"
start_broker avro:1 again:1 bad:1 replayed:1 copy:1 keyed:1 keycopy:1
AVRO=$(topic avro)
AGAIN=$(topic again)
COPY=$(topic copy)
KEYED=$(topic keyed)
KEYCOPY=$(topic keycopy)
BAD=$(topic bad)
REPLAYED=$(topic replayed)
REG=$(registry_url)
PY=/usr/bin/python3
TOOL="$KPIPE_SOURCE_DIR/tests/integration/bin/confluent_avro.py"
$PY -c 'import avro' 2>/dev/null || fail "Debian's python3-avro is missing (scripts/deps installs it)"

# register SUBJECT FILE: registers an Avro schema with the registry's REST
# API directly (not through kpipe); prints its id.
register() {
  jq -Rs '{schema: .}' "$2" |
    curl -sf -XPOST -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
      --data-binary @- "$REG/subjects/$1/versions" | jq -e .id ||
    fail "cannot register $2 under $1"
}
norm() { jq -S -c "$@"; }

cat >"$WORK/all.avsc" <<'AVSC'
{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"},
  {"name": "qty", "type": "int"},
  {"name": "price", "type": "double"},
  {"name": "ratio", "type": "float"},
  {"name": "paid", "type": "boolean"},
  {"name": "note", "type": ["null", "string"]},
  {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "attrs", "type": {"type": "map", "values": "long"}},
  {"name": "raw", "type": "bytes"},
  {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
  {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
    {"name": "name", "type": "string"},
    {"name": "vip", "type": ["null", "boolean"], "default": null}]}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "day", "type": {"type": "int", "logicalType": "date"}},
  {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "big", "type": "double"}
]}
AVSC
cat >"$WORK/all.py" <<'PY'
utc = datetime.timezone.utc
records = [
  {"id": 1, "qty": 3, "price": 12.5, "ratio": 0.25, "paid": True, "note": "first \"one\" ✓",
   "status": "PAID", "tags": ["a", "b"], "attrs": {"x": 1, "y": -2}, "raw": b"\x00\xff\x10",
   "digest": b"\xde\xad\xbe\xef", "customer": {"name": "Ann", "vip": True},
   "at": datetime.datetime(2026, 11, 29, 10, 15, 30, 123000, tzinfo=utc),
   "at_us": datetime.datetime(2026, 11, 29, 10, 15, 30, 123456, tzinfo=utc),
   "day": datetime.date(2026, 11, 29), "total": decimal.Decimal("1234.50"),
   "ref": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "big": 1e300},
  {"id": -9007199254740993, "qty": -1, "price": -0.1, "ratio": 1.5, "paid": False, "note": None,
   "status": "NEW", "tags": [], "attrs": {}, "raw": b"", "digest": b"\x00\x00\x00\x00",
   "customer": {"name": "", "vip": None},
   "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=utc),
   "at_us": datetime.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=utc),
   "day": datetime.date(1, 1, 1), "total": decimal.Decimal("-0.05"),
   "ref": "00000000-0000-0000-0000-000000000000", "big": float("nan")},
]
PY
V1=$(register "$AVRO-value" "$WORK/all.avsc")

# 1. python3-avro's bytes decode to the plain JSON of kpipe(7).
$PY "$TOOL" encode "$WORK/all.avsc" "$V1" "$WORK/all.py" >"$WORK/framed.ndjson"
kproduce -b "$BROKERS" -t "$AVRO" --envelope "$WORK/framed.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$REG"
cp "$WORK/out" "$WORK/decoded.ndjson"
assert_eq "$(jq -c '[.key, .value_schema_id]' "$WORK/decoded.ndjson" | tr '\n' ' ')" \
  "[\"k0\",$V1] [\"k1\",$V1] " "keys and schema ids"
cat >"$WORK/expected.ndjson" <<JSON
{"id":1,"qty":3,"price":12.5,"ratio":0.25,"paid":true,"note":"first \"one\" ✓","status":"PAID","tags":["a","b"],"attrs":{"x":1,"y":-2},"raw":"AP8Q","digest":"3q2+7w==","customer":{"name":"Ann","vip":true},"at":"2026-11-29T10:15:30.123Z","at_us":"2026-11-29T10:15:30.123456Z","day":"2026-11-29","total":"1234.50","ref":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","big":1e300}
{"id":-9007199254740993,"qty":-1,"price":-0.1,"ratio":1.5,"paid":false,"note":null,"status":"NEW","tags":[],"attrs":{},"raw":"","digest":"AAAAAA==","customer":{"name":"","vip":null},"at":"1969-12-31T23:59:59.999Z","at_us":"1970-01-01T00:00:00.000001Z","day":"0001-01-01","total":"-0.05","ref":"00000000-0000-0000-0000-000000000000","big":"NaN"}
JSON
# The text, not just the value: field order, and a long beyond 2^53 exact.
assert_eq "$(jq -c .value "$WORK/decoded.ndjson" | sed 's/"id":-9007199254740992/X/')" \
  "$(jq -c . "$WORK/expected.ndjson" | sed 's/"id":-9007199254740992/X/')" "decoded values"
grep -q '"id":-9007199254740993' "$WORK/decoded.ndjson" || fail "a long beyond 2^53 lost digits"
# The same through python3-avro's own reading of the bytes.
kconsume -b "$BROKERS" -t "$AVRO" -e --value-format bytes | $PY "$TOOL" decode "$WORK/all.avsc" |
  jq -c .value | norm >"$WORK/python.ndjson"
assert_files_equal "$WORK/python.ndjson" <(norm . "$WORK/expected.ndjson")
# Epoch milliseconds with --time-format ms; Avro's JSON encoding on request.
expect_exit 0 kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$REG" \
  --time-format ms --format value
assert_eq "$(jq -c '[.at, .at_us]' "$WORK/out" | tr '\n' ' ')" \
  "[1795947330123,1795947330123.456] [-1,0.001] " "--time-format ms"
expect_exit 0 kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$REG" \
  --avro-json standard --format value
assert_eq "$(jq -c '[.note, .customer.vip]' "$WORK/out" | tr '\n' ' ')" \
  '[{"string":"first \"one\" ✓"},{"boolean":true}] [null,null] ' "--avro-json standard"

# 2. A record read and produced again keeps its schema and its bytes.
kproduce -b "$BROKERS" -t "$AGAIN" --envelope --value-format avro --registry "$REG" \
  --subject "$AVRO-value" "$WORK/decoded.ndjson"
kconsume -b "$BROKERS" -t "$AGAIN" -e --value-format bytes | jq -c .value_base64 >"$WORK/again.b64"
assert_files_equal "$WORK/again.b64" <(jq -c .value_base64 "$WORK/framed.ndjson")
# Without --subject too: every envelope names its schema, so the copy's own
# subject, which does not exist, is never needed (it was: "subject
# '...-copy-value' not found").
expect_exit 0 kproduce -b "$BROKERS" -t "$COPY" --envelope --value-format avro --registry "$REG" \
  "$WORK/decoded.ndjson"
kconsume -b "$BROKERS" -t "$COPY" -e --value-format bytes | jq -c .value_base64 >"$WORK/copy.b64"
assert_files_equal "$WORK/copy.b64" <(jq -c .value_base64 "$WORK/framed.ndjson")
# A record that names no schema needs the subject: exit 1, saying which.
jq -c 'del(.value_schema_id)' "$WORK/decoded.ndjson" | head -1 >"$WORK/no-id.ndjson"
expect_exit 1 kproduce -b "$BROKERS" -t "$COPY" --envelope --value-format avro --registry "$REG" \
  "$WORK/no-id.ndjson"
assert_eq "$(wc -l <"$WORK/err")" 1 "lines of error"
assert_contains "$WORK/err" "kproduce: error: --value-format avro: "
assert_contains "$WORK/err" "$COPY-value"
assert_contains "$WORK/err" "(give --schema FILE --auto-register to register one)"
# Keys likewise: encoded with their subject's schema, read back with
# key_schema_id, and copied with no subject for the copy's keys.
echo '"string"' >"$WORK/key.avsc"
KID=$(register "$KEYED-key" "$WORK/key.avsc")
kproduce -b "$BROKERS" -t "$KEYED" --envelope --key-format avro --value-format avro \
  --registry "$REG" "$WORK/decoded.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$KEYED" -e --key-format avro --value-format avro \
  --registry "$REG"
cp "$WORK/out" "$WORK/keyed.ndjson"
assert_eq "$(jq -c '[.key, .key_schema_id, .value_schema_id]' "$WORK/keyed.ndjson" | tr '\n' ' ')" \
  "[\"k0\",$KID,$V1] [\"k1\",$KID,$V1] " "keys and their schema ids"
expect_exit 0 kproduce -b "$BROKERS" -t "$KEYCOPY" --envelope --key-format avro \
  --value-format avro --registry "$REG" "$WORK/keyed.ndjson"
kconsume -b "$BROKERS" -t "$KEYCOPY" -e --key-format bytes --value-format bytes |
  jq -c '[.key_base64, .value_base64]' >"$WORK/keycopy"
kconsume -b "$BROKERS" -t "$KEYED" -e --key-format bytes --value-format bytes |
  jq -c '[.key_base64, .value_base64]' >"$WORK/keyed"
assert_files_equal "$WORK/keycopy" "$WORK/keyed"

# 3. kproduce encodes JSON lines; python3-avro reads them back as the input.
jq -c .value "$WORK/decoded.ndjson" | head -1 >"$WORK/lines.ndjson"
jq -c '.id = 2 | .note = "x" | .status = "SHIPPED" | .customer.vip = false' "$WORK/lines.ndjson" \
  >>"$WORK/lines.ndjson"
kproduce -b "$BROKERS" -t "$AGAIN" --value-format avro --registry "$REG" --subject "$AVRO-value" \
  "$WORK/lines.ndjson"
kconsume -b "$BROKERS" -t "$AGAIN" -e --from 2 --value-format bytes |
  $PY "$TOOL" decode "$WORK/all.avsc" >"$WORK/python2.ndjson"
assert_eq "$(jq -r .id "$WORK/python2.ndjson" | sort -u)" "$V1" "schema id kproduce framed with"
assert_files_equal <(jq -c .value "$WORK/python2.ndjson" | norm) <(norm . "$WORK/lines.ndjson")
# A value that does not fit is bad input naming the field; an RFC 3339
# time with an offset and epoch milliseconds are the same instant.
jq -c '.price = "cheap"' "$WORK/lines.ndjson" | head -1 >"$WORK/misfit.ndjson"
expect_exit 65 kproduce -b "$BROKERS" -t "$AGAIN" --value-format avro --registry "$REG" \
  --subject "$AVRO-value" "$WORK/misfit.ndjson"
assert_contains "$WORK/err" "line 1: value: avro: field 'price'"

# 4. Schema evolution: the subject gains a field with a default; a record
# written before reads with its own (writer) schema, one written after with
# the new field.
jq '.fields += [{"name": "channel", "type": "string", "default": "web"}]' "$WORK/all.avsc" \
  >"$WORK/v2.avsc"
V2=$(register "$AVRO-value" "$WORK/v2.avsc")
[[ "$V2" != "$V1" ]] || fail "the registry gave the new version the old id"
jq -c '.channel = "shop"' "$WORK/lines.ndjson" | head -1 |
  kproduce -b "$BROKERS" -t "$AVRO" --value-format avro --registry "$REG"
expect_exit 0 kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$REG"
assert_eq "$(jq -c '[.value_schema_id, .value.channel]' "$WORK/out" | tr '\n' ' ')" \
  "[$V1,null] [$V1,null] [$V2,\"shop\"] " "old and new records after the subject evolved"

# 5. Hostile bytes: not framed, an unknown id, truncated, trailing bytes,
# empty. Each is a dead letter holding the raw bytes; a replay gives them
# back unchanged, and the good record between them is written.
good=$(jq -r .value_base64 "$WORK/framed.ndjson" | head -1)
short=$(echo "$good" | base64 -d | head -c 20 | base64 -w0)
long=$( (echo "$good" | base64 -d; printf 'xyz') | base64 -w0)
unknown=$(printf '\0\x00\x0f\x42\x3f\x02' | base64 -w0)
{
  echo '{"key":"json","value":{"not":"avro"}}'
  echo "{\"key\":\"unknown\",\"value_base64\":\"$unknown\"}"
  echo "{\"key\":\"short\",\"value_base64\":\"$short\"}"
  echo "{\"key\":\"good\",\"value_base64\":\"$good\"}"
  echo "{\"key\":\"long\",\"value_base64\":\"$long\"}"
  echo '{"key":"frame","value_base64":"AAAA"}'
  echo '{"key":"empty","value":""}'
} >"$WORK/hostile.ndjson"
kproduce -b "$BROKERS" -t "$BAD" --envelope "$WORK/hostile.ndjson"
expect_exit 65 kconsume -b "$BROKERS" -t "$BAD" -e --value-format avro --registry "$REG"
assert_eq "$(cat "$WORK/err")" \
  "kconsume: error: $BAD[0]@0: value: magic byte 0x7b is not 0: not in the Confluent wire format"
DLQ=$(store dlq)
expect_exit 0 kconsume -b "$BROKERS" -t "$BAD" -e --value-format avro --registry "$REG" --dlq "$DLQ"
assert_eq "$(jq -r .key "$WORK/out")" "good" "the one good record"
assert_contains "$WORK/err" "sent 6 records to the dead-letter store"
kdlq list --dlq "$DLQ" --format ndjson >"$WORK/letters.ndjson"
assert_eq "$(wc -l <"$WORK/letters.ndjson")" 6 "dead letters"
for why in "not in the Confluent wire format" "999999" "truncated" "left after" "5 bytes expected" \
  "empty"; do
  assert_contains "$WORK/letters.ndjson" "$why"
done
expect_exit 0 kdlq replay --dlq "$DLQ" --to "kafka:$REPLAYED" -b "$BROKERS"
kconsume -b "$BROKERS" -t "$REPLAYED" -e --value-format bytes | jq -c '[.key, .value_base64]' |
  sort >"$WORK/replayed"
kconsume -b "$BROKERS" -t "$BAD" -e --value-format bytes | jq -c '[.key, .value_base64]' |
  grep -v '"good"' | sort >"$WORK/original"
assert_files_equal "$WORK/replayed" "$WORK/original"

# 6. The registry out of reach: exit 1 within --timeout, one line (-q: not
# the warning of a password on the command line).
dead=$(bash -c 'source "$1/scripts/free-port.sh"; free_port' _ "$KPIPE_SOURCE_DIR")
expect_exit 1 kconsume -q -b "$BROKERS" -t "$AVRO" -e --value-format avro --timeout 2s \
  --registry "http://user:hunter2@127.0.0.1:$dead/"
assert_eq "$(wc -l <"$WORK/err")" 1 "lines of error"
assert_contains "$WORK/err" "127.0.0.1:$dead"
grep -q hunter2 "$WORK/err" && fail "the registry's password was printed"
# kproduce retries it for the whole --timeout (it gave up at 1.5 s of 3 s,
# "retried for 1.5s"), and suggests no --auto-register, which needs the
# same registry.
printf '{"a":1}\n' >"$WORK/one.ndjson"
expect_exit 1 kproduce -b "$BROKERS" -t "$AGAIN" --value-format avro --timeout 3s \
  --registry "http://127.0.0.1:$dead" "$WORK/one.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: --value-format avro: registry http://127.0.0.1:$dead/subjects/$AGAIN-value/versions/latest: cannot connect: Connection refused (retried for 3s)"
# A registry that answers that the subject is not there: registering one is
# the remedy.
expect_exit 1 kproduce -b "$BROKERS" -t "$AGAIN" --value-format avro --registry "$REG" \
  --subject "$AGAIN-none" "$WORK/one.ndjson"
assert_eq "$(cat "$WORK/err")" "kproduce: error: --value-format avro: registry $REG/subjects/$AGAIN-none/versions/latest: subject '$AGAIN-none' not found (404) (give --schema FILE --auto-register to register one)"
# No registry given at all is a usage error before any broker is asked.
expect_exit 2 env -u KPIPE_REGISTRY kconsume -b "$BROKERS" -t "$AVRO" --value-format avro --config none
assert_contains "$WORK/err" "no Schema Registry given"
echo "schema_avro: ok"
