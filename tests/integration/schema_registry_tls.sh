#!/usr/bin/env bash
# A Schema Registry over https (kpipe(7), SCHEMA REGISTRY): against a
# registry of the test's own (scripts/registry up --tls, its certificate
# from the test CA), kproduce registers and encodes Avro and kconsume
# decodes it with --registry-ca naming that CA; without it (the system's
# CAs) or with another CA, each stops at once, exit 1, with one line that
# names the registry and the certificate problem, the URL's password not
# shown, never retried until --timeout.
source "$(dirname "$0")/lib.sh"
# The registry is the test's own, not the fixture's: one run is enough.
requires_broker kbroker "it starts an https registry of its own"
start_broker avro:1
AVRO=$(topic avro)
# lib.sh's cleanup stops a registry whose state is $WORK/registry.
reg() { KPIPE_REGISTRY_STATE="$WORK/registry" "$KPIPE_SOURCE_DIR/scripts/registry" "$@"; }
reg up --tls --stop-with-parent >"$WORK/reg.out" 2>"$WORK/reg.err" ||
  fail "cannot start a registry with --tls: $(cat "$WORK/reg.err")"
REG=$(tail -n 1 "$WORK/reg.out")
[[ $REG == https://127.0.0.1:*/apis/ccompat/v7 ]] || fail "up --tls printed '$REG'"
CA=$(reg ca)
"$KPIPE_SOURCE_DIR/scripts/test-ca" "$WORK/other" >/dev/null # a CA that signed nothing of the registry's
# The URL with a password in it, which no message may show.
SECRET_REG=${REG/https:\/\//https://pipe:s3cretpw@}

cat >"$WORK/order.avsc" <<'AVSC'
{"type": "record", "name": "Order", "fields": [
  {"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
AVSC
printf '%s\n' '{"id":1,"note":"first"}' '{"id":2,"note":"second"}' >"$WORK/orders.ndjson"

# --- verified with --registry-ca: works ------------------------------------------------
expect_exit 0 kproduce -b "$BROKERS" -t "$AVRO" --value-format avro --registry "$SECRET_REG" \
  --registry-ca "$CA" --schema "$WORK/order.avsc" --auto-register "$WORK/orders.ndjson"
expect_exit 0 kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$SECRET_REG" \
  --registry-ca "$CA"
assert_eq "$(jq -c '[.offset, .value, .value_schema_id]' "$WORK/out")" \
  $'[0,{"id":1,"note":"first"},1]\n[1,{"id":2,"note":"second"},1]' "decoded over https"
# Plain http to that port: nothing to talk to (it serves https only).
[[ $(curl -s -o /dev/null -m 10 -w '%{http_code}' "${REG/https/http}/subjects" || true) == 000 ]] ||
  fail "the registry answers plain http"

# --- not verified: one line, exit 1, at once -------------------------------------------
# refused WHAT PATH CMD...: CMD exits 1 (a hang is cut by timeout's 124)
# with one line on stderr naming the registry's URL at PATH and the
# certificate problem, without the password; nothing on stdout.
refused() {
  local what=$1 path=$2
  shift 2
  expect_exit 1 timeout 60 "$@" --timeout 30s
  # The URL's password on the command line is warned of (kpipe(7), KAFKA
  # OPTIONS): that warning, and one line more.
  grep -v "warning: .* puts a password on the command line" "$WORK/err" >"$WORK/err.lines" || true
  mv "$WORK/err.lines" "$WORK/err"
  assert_eq "$(wc -l <"$WORK/err")" 1 "$what: lines on stderr ($(cat "$WORK/err"))"
  assert_contains "$WORK/err" "error: "
  assert_contains "$WORK/err" "registry $REG$path: SSL certificate problem: "
  grep -q s3cretpw "$WORK/err" && fail "$what: the password was printed: $(cat "$WORK/err")"
  # A certificate that does not verify will not verify on a second try.
  grep -q retried "$WORK/err" && fail "$what: retried: $(cat "$WORK/err")"
  assert_empty "$WORK/out"
}
refused "kconsume, the system's CAs" /schemas/ids/1 \
  kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$SECRET_REG"
refused "kconsume, another CA" /schemas/ids/1 \
  kconsume -b "$BROKERS" -t "$AVRO" -e --value-format avro --registry "$SECRET_REG" \
  --registry-ca "$WORK/other/ca.crt"
refused "kproduce, another CA" /subjects/"$AVRO"-value/versions/latest \
  kproduce -b "$BROKERS" -t "$AVRO" --value-format avro --registry "$SECRET_REG" \
  --registry-ca "$WORK/other/ca.crt" "$WORK/orders.ndjson"
echo "schema_registry_tls: ok"
