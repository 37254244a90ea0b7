#!/usr/bin/env bash
# Debian 12's librdkafka (2.0.2) repeats the client's nonce in SCRAM's final
# message; Kafka 4 refuses that as invalid credentials (librdkafka 2.6.1
# fixed it). A user whose password is right must not be left resetting it:
# against a real Kafka 4 broker behind SASL_SSL and SCRAM-SHA-512, kconsume
# and kproduce stop within --timeout with one line that says so; against
# Kafka 3.9 the same client file works (the other cluster tests).
source "$(dirname "$0")/../integration/lib.sh"

# The pinned Kafka 4 release, secure: scripts/kafka's own kcat cannot log
# in either, so it has no topic; the login is refused before any is asked.
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KPIPE_SOURCE_DIR/scripts/kafka.pom.xml")
[[ $version == 4.* ]] || fail "the pinned Kafka is $version, not 4.x: this test has nothing to show"
own_cluster 1 --version "$version"

expect_hint() {
  local program=$1 err=$2 rc=$3
  ((rc == 1)) || fail "$program exited $rc, not 1: $(cat "$err")"
  (($(wc -l <"$err") == 1)) || fail "$program said more than one line: $(cat "$err")"
  grep -qF "$program: error: cannot reach broker '$BROKERS': SASL authentication error: " "$err" ||
    fail "$program did not name the SASL failure: $(cat "$err")"
  grep -qF "(if the password is right: librdkafka 2.0.2 cannot log in with SCRAM to Kafka 4 brokers, fixed in librdkafka 2.6.1; use Kafka 3.9 or earlier, or SASL PLAIN or OAUTHBEARER)" "$err" ||
    fail "$program did not say why a right password is refused: $(cat "$err")"
  grep -qF "$(grep '^sasl.password=' "$ADMIN_CONFIG" | cut -d= -f2-)" "$err" && fail "$program quoted the password"
  return 0
}

rc=0
timeout 30 kconsume -t "$(topic in)" -e --timeout 5s >"$WORK/out" 2>"$WORK/consume.err" || rc=$?
expect_hint kconsume "$WORK/consume.err" "$rc"
[[ ! -s "$WORK/out" ]] || fail "kconsume wrote records: $(head -3 "$WORK/out")"

rc=0
echo '{"value":1}' | timeout 30 kproduce -t "$(topic out)" --timeout 5s 2>"$WORK/produce.err" || rc=$?
expect_hint kproduce "$WORK/produce.err" "$rc"

# The hint rests on librdkafka's version: the suite runs on Debian 12's.
[[ $(dpkg-query -W -f='${Version}' librdkafka1 2>/dev/null) == 2.0.2* ]] ||
  echo "note: librdkafka1 is $(dpkg-query -W -f='${Version}' librdkafka1), not 2.0.2" >&2
echo "PASS: $TEST_NAME"
