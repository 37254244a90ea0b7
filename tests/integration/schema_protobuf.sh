#!/usr/bin/env bash
# Protobuf in the Confluent wire format against a real Schema Registry
# (kpipe(7), SCHEMA REGISTRY): a schema that imports another subject's,
# with a nested type, a oneof, a map, an enum and a repeated field; bytes
# made by an independent encoder (protoc --encode) decode to the proto3
# JSON mapping, the framing's message index picks the message, and what
# kproduce encodes protoc decodes back to the input. JSON Schema payloads
# pass as they are, with their schema's id.
source "$(dirname "$0")/lib.sh"
start_broker pb:1 pbout:1 js:1
PB=$(topic pb)
PBOUT=$(topic pbout)
JS=$(topic js)
REG=$(registry_url)
command -v protoc >/dev/null || fail "protoc is missing (scripts/deps installs protobuf-compiler)"

# register SUBJECT TYPE FILE [REFERENCES-JSON]: through the registry's REST
# API directly; prints the id.
register() {
  jq -Rs --arg type "$2" --argjson refs "${4:-[]}" '{schema: ., schemaType: $type, references: $refs}' "$3" |
    curl -sf -XPOST -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
      --data-binary @- "$REG/subjects/$1/versions" | jq -e .id ||
    fail "cannot register $3 under $1"
}
norm() { jq -S -c "$@"; }

mkdir -p "$WORK/proto"
cat >"$WORK/proto/common.proto" <<'PROTO'
syntax = "proto3";
package shop;
message Money {
  string currency = 1;
  int64 units = 2;
}
PROTO
cat >"$WORK/proto/order.proto" <<'PROTO'
syntax = "proto3";
package shop;
import "common.proto";
message Order {
  enum Status {
    NEW = 0;
    PAID = 1;
  }
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  int64 id = 1;
  Status status = 2;
  repeated Line lines = 3;
  map<string, string> labels = 4;
  oneof payment {
    string card = 5;
    Money cash = 6;
  }
  bytes blob = 7;
  double score = 8;
  bool rush = 9;
}
message Refund {
  int64 order_id = 1;
  Money amount = 2;
}
PROTO
COMMON=$(register "$PB-common" PROTOBUF "$WORK/proto/common.proto")
V=$(register "$PB-value" PROTOBUF "$WORK/proto/order.proto" \
  "[{\"name\":\"common.proto\",\"subject\":\"$PB-common\",\"version\":1}]")
[[ -n "$COMMON" ]] || fail "no id for common.proto"

# unhex HEX: the bytes; hex < bytes: their hex digits.
unhex() { printf "$(sed 's/../\\x&/g' <<<"$1")"; }
hex() { od -An -v -tx1 | tr -d ' \n'; }
# frame ID INDEXES-HEX < payload: the Confluent framing, base64.
frame() { (unhex "$(printf '00%08x%s' "$1" "$2")"; cat) | base64 -w0; }
encode() { protoc -I "$WORK/proto" --encode="$1" order.proto; }
cat >"$WORK/order.txt" <<'TXT'
id: 9007199254740993
status: PAID
lines { sku: "a-1" qty: 2 }
lines { sku: "b-2" qty: 1 }
labels { key: "gift" value: "yes" }
cash { currency: "EUR" units: 12 }
blob: "\000\377"
score: 0.5
TXT
echo 'order_id: 7 amount { currency: "USD" units: 3 }' >"$WORK/refund.txt"
{
  # Index [0], written as the single byte 0; then [1] (the second message).
  echo "{\"key\":\"order\",\"value_base64\":\"$(encode shop.Order <"$WORK/order.txt" | frame "$V" 00)\"}"
  echo "{\"key\":\"refund\",\"value_base64\":\"$(encode shop.Refund <"$WORK/refund.txt" | frame "$V" 0202)\"}"
  # An empty Order: every field still shows, with its default.
  echo "{\"key\":\"empty\",\"value_base64\":\"$(printf '' | frame "$V" 00)\"}"
} >"$WORK/framed.ndjson"
kproduce -b "$BROKERS" -t "$PB" --envelope "$WORK/framed.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$PB" -e --value-format protobuf --registry "$REG"
cp "$WORK/out" "$WORK/decoded.ndjson"
assert_eq "$(jq -r '.value_schema_id' "$WORK/decoded.ndjson" | sort -u)" "$V" "schema ids"
cat >"$WORK/expected.ndjson" <<'JSON'
{"id":"9007199254740993","status":"PAID","lines":[{"sku":"a-1","qty":2},{"sku":"b-2","qty":1}],"labels":{"gift":"yes"},"cash":{"currency":"EUR","units":"12"},"blob":"AP8=","score":0.5,"rush":false}
{"orderId":"7","amount":{"currency":"USD","units":"3"}}
{"id":"0","status":"NEW","lines":[],"labels":{},"blob":"","score":0,"rush":false}
JSON
assert_files_equal <(jq -c .value "$WORK/decoded.ndjson" | norm) <(norm . "$WORK/expected.ndjson")

# kproduce encodes the Order lines (index [0]); protoc reads them back.
jq -c .value "$WORK/decoded.ndjson" | head -1 >"$WORK/orders.ndjson"
kproduce -b "$BROKERS" -t "$PBOUT" --value-format protobuf --registry "$REG" --subject "$PB-value" \
  "$WORK/orders.ndjson"
kconsume -b "$BROKERS" -t "$PBOUT" -e --value-format bytes | jq -r .value_base64 | base64 -d >"$WORK/out.bin"
assert_eq "$(head -c 6 "$WORK/out.bin" | hex)" "$(printf '00%08x00' "$V")" "framing and index"
tail -c +7 "$WORK/out.bin" | protoc -I "$WORK/proto" --decode=shop.Order order.proto >"$WORK/back.txt"
assert_files_equal <(encode shop.Order <"$WORK/back.txt" | hex) <(encode shop.Order <"$WORK/order.txt" | hex)
# A field the message lacks is bad input naming it.
echo '{"id":"1","totl":3}' >"$WORK/misfit.ndjson"
expect_exit 65 kproduce -b "$BROKERS" -t "$PBOUT" --value-format protobuf --registry "$REG" \
  --subject "$PB-value" "$WORK/misfit.ndjson"
assert_contains "$WORK/err" "line 1: value: protobuf:"
assert_contains "$WORK/err" "totl"
# A message index the schema lacks is bad input of kconsume.
echo "{\"key\":\"bad\",\"value_base64\":\"$(printf '' | frame "$V" 0206)\"}" |
  kproduce -b "$BROKERS" -t "$PB" --envelope
expect_exit 65 kconsume -b "$BROKERS" -t "$PB" -e --value-format protobuf --registry "$REG"
assert_contains "$WORK/err" "$PB[0]@3: value: protobuf:"

# JSON Schema: the payload as it is, its id kept; kproduce checks values.
cat >"$WORK/order.schema.json" <<'JSON'
{"type": "object", "properties": {"id": {"type": "integer"}, "total": {"type": "number"}},
 "required": ["id"]}
JSON
JV=$(register "$JS-value" JSON "$WORK/order.schema.json")
printf '{"id":1,"total":2.5}\n{"id":2}\n' >"$WORK/js.ndjson"
kproduce -b "$BROKERS" -t "$JS" --value-format json-schema --registry "$REG" "$WORK/js.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$JS" -e --value-format json-schema --registry "$REG"
assert_eq "$(jq -c '[.value, .value_schema_id]' "$WORK/out" | tr '\n' ' ')" \
  "[{\"id\":1,\"total\":2.5},$JV] [{\"id\":2},$JV] " "json-schema values"
echo '{"total":1}' >"$WORK/js-bad.ndjson"
expect_exit 65 kproduce -b "$BROKERS" -t "$JS" --value-format json-schema --registry "$REG" "$WORK/js-bad.ndjson"
assert_contains "$WORK/err" "line 1: value: json-schema: field 'id'"
echo "schema_protobuf: ok"
