#!/usr/bin/env bash
# What a team's client settings look like against a secure cluster
# (SASL_SSL, SCRAM-SHA-512, ACLs): the librdkafka file `scripts/kafka user`
# writes, and the Java file Kafka's own tools read (a PEM truststore and a
# JAAS login), both work; a wrong password, a CA that did not sign the
# brokers' certificates and a plaintext client each stop within --timeout
# with one line that says which, never quoting the password.
source "$(dirname "$0")/../integration/lib.sh"
own_cluster 1
start_broker in:2
T=$(topic in)
seq 1 20 | jq -c '{key: (. | tostring), value: {n: .}}' | kproduce -t "$T" ||
  fail "the admin could not produce"
user=$(kafka_tool user reader)
kafka_tool acls --add --allow-principal User:reader --operation Read --topic "$T" >/dev/null

count() { kconsume --config "$1" -t "$T" -e --timeout 10s 2>"$WORK/err" | wc -l; }
assert_eq "$(count "$user")" 20 "records read with the user's librdkafka file"
assert_eq "$(count "${user%.properties}.java.properties")" 20 "records read with the user's Java file"
grep -q "ssl.truststore" "$WORK/err" && fail "the Java file's PEM truststore was ignored: $(cat "$WORK/err")"

# refused FILE WHAT: kconsume with FILE exits 1 with one line containing WHAT.
refused() {
  local rc=0 started=$SECONDS
  kconsume --config "$1" -t "$T" -e --timeout 5s >/dev/null 2>"$WORK/err" || rc=$?
  ((rc == 1)) || fail "with $1: exit $rc, not 1: $(cat "$WORK/err")"
  ((SECONDS - started < 20)) || fail "with $1: stopped only after $((SECONDS - started))s"
  grep -v "warning: kafka: ignoring" "$WORK/err" >"$WORK/err.lines" || true
  (($(wc -l <"$WORK/err.lines") == 1)) || fail "with $1: not one line: $(cat "$WORK/err")"
  grep -qF "kconsume: error: cannot reach broker '$BROKERS': $2" "$WORK/err.lines" ||
    fail "with $1: expected '$2': $(cat "$WORK/err.lines")"
  grep -qF "wrong-pass" "$WORK/err" && fail "with $1: the password was quoted: $(cat "$WORK/err")"
  return 0
}

sed 's/^sasl.password=.*/sasl.password=wrong-pass/' "$user" >"$WORK/wrong.properties"
refused "$WORK/wrong.properties" "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"

"$KPIPE_SOURCE_DIR/scripts/test-ca" "$WORK/other-ca" >/dev/null
sed "s#^ssl.ca.location=.*#ssl.ca.location=$WORK/other-ca/ca.crt#" "$user" >"$WORK/ca.properties"
refused "$WORK/ca.properties" "SSL handshake failed"
grep -qF "certificate verify failed" "$WORK/err.lines" || fail "the CA was not named: $(cat "$WORK/err.lines")"

grep -v '^security.protocol=' "$user" >"$WORK/plain.properties"
refused "$WORK/plain.properties" "disconnected while requesting ApiVersion: might be caused by incorrect security.protocol configuration (connecting to a SSL listener?)"
echo "PASS: $TEST_NAME"
