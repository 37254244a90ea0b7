#!/usr/bin/env bash
# The default client file, as kcat reads ~/.config/kcat.conf: a
# client.properties under ~/.config/kpipe (or $XDG_CONFIG_HOME/kpipe, or
# the file $KPIPE_CONFIG names) gives the brokers and the rest when the
# command line does not; --config FILE replaces it, --config none reads no
# file; -X, -b and KPIPE_BROKERS win over it.
source "$(dirname "$0")/lib.sh"
start_broker cfg:2
T=$(topic cfg)
for i in $(seq 0 9); do echo "{\"i\":$i}"; done | kproduce -b "$BROKERS" -t "$T"

# A home of the test's own, so that no file of the user's is read.
export HOME="$WORK/home"
unset KPIPE_CONFIG XDG_CONFIG_HOME
FILE=$HOME/.config/kpipe/client.properties
mkdir -p "${FILE%/*}"
printf '# the cluster\nbootstrap.servers=%s\nclient.id=kpipe-test\n' "$BROKERS" >"$FILE"

expect_exit 0 kconsume -t "$T" -e
assert_eq "$(wc -l <"$WORK/out")" 10 "brokers from ~/.config/kpipe/client.properties"
# -v names the file, since nothing on the command line does.
expect_exit 0 kconsume -t "$T" -e -v
assert_contains "$WORK/err" "kconsume: client properties from '$FILE'"
# Every program that talks to Kafka reads it.
echo '{"i":10}' | kproduce -t "$T" 2>"$WORK/err" || fail "kproduce without -b: $(cat "$WORK/err")"
expect_exit 0 kconsume -t "$T" -e
assert_eq "$(wc -l <"$WORK/out")" 11 "kproduce wrote through the file's brokers"

# A Java-only key the file holds is left out, with a warning that names
# the file it came from.
printf 'ssl.truststore.type=JKS\n' >>"$FILE"
expect_exit 0 kconsume -t "$T" -e
assert_contains "$WORK/err" \
  "kconsume: warning: kafka: ignoring 'ssl.truststore.type' of '$FILE': librdkafka has no such property"
printf '# the cluster\nbootstrap.servers=%s\nclient.id=kpipe-test\n' "$BROKERS" >"$FILE"

# --config none: no file at all, so no brokers.
expect_exit 2 kconsume -t "$T" -e --config none
assert_eq "$(cat "$WORK/err")" "kconsume: error: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS"
# --config FILE replaces the default file: it is not read, not even for
# the brokers the given file lacks.
printf 'client.id=given\n' >"$WORK/given.properties"
expect_exit 2 kconsume -t "$T" -e --config "$WORK/given.properties"
assert_eq "$(cat "$WORK/err")" "kconsume: error: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS"

# -X and -b win over the file: a broker that refuses connections...
expect_exit 1 kconsume -t "$T" -e -X bootstrap.servers=127.0.0.1:1 --timeout 2s
assert_eq "$(cat "$WORK/err")" "kconsume: error: cannot reach broker '127.0.0.1:1': connection refused"
expect_exit 1 kconsume -b 127.0.0.1:1 -t "$T" -e --timeout 2s
assert_eq "$(cat "$WORK/err")" "kconsume: error: cannot reach broker '127.0.0.1:1': connection refused"
# ... and so does KPIPE_BROKERS, set for this shell where the file is for
# every run.
KPIPE_BROKERS=127.0.0.1:1 expect_exit 1 kconsume -t "$T" -e --timeout 2s
assert_eq "$(cat "$WORK/err")" "kconsume: error: cannot reach broker '127.0.0.1:1': connection refused"
# A file naming a broker out of reach, mended by -X.
printf 'bootstrap.servers=127.0.0.1:1\n' >"$FILE"
expect_exit 0 kconsume -t "$T" -e -X "bootstrap.servers=$BROKERS" --timeout 2s
assert_eq "$(wc -l <"$WORK/out")" 11 "-X over the file"

# KPIPE_CONFIG names the file instead (the one in ~/.config would fail).
printf 'bootstrap.servers=%s\n' "$BROKERS" >"$WORK/env.properties"
KPIPE_CONFIG=$WORK/env.properties expect_exit 0 kconsume -t "$T" -e --timeout 2s
assert_eq "$(wc -l <"$WORK/out")" 11 "brokers from \$KPIPE_CONFIG"
# ... and it must exist.
KPIPE_CONFIG=$WORK/missing.properties expect_exit 2 kconsume -t "$T" -e
assert_eq "$(cat "$WORK/err")" \
  "kconsume: error: cannot open config file '$WORK/missing.properties' (from KPIPE_CONFIG): No such file or directory"
# XDG_CONFIG_HOME moves ~/.config.
mkdir -p "$WORK/xdg/kpipe"
cp "$WORK/env.properties" "$WORK/xdg/kpipe/client.properties"
XDG_CONFIG_HOME=$WORK/xdg expect_exit 0 kconsume -t "$T" -e --timeout 2s
assert_eq "$(wc -l <"$WORK/out")" 11 "brokers from \$XDG_CONFIG_HOME/kpipe/client.properties"

# A bad line is named with its file and line.
printf 'bootstrap.servers=%s\n\n=oops\n' "$BROKERS" >"$FILE"
expect_exit 2 kconsume -t "$T" -e
assert_eq "$(cat "$WORK/err")" "kconsume: error: $FILE: line 3: missing key"
# Without one, the usual error.
rm "$FILE"
expect_exit 2 kconsume -t "$T" -e
assert_eq "$(cat "$WORK/err")" "kconsume: error: no brokers given: use -b HOST:PORT or set KPIPE_BROKERS"
