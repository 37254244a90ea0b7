#!/usr/bin/env bash
# TLS to PostgreSQL (kpipe(7), STORES): kupsert into a server of the
# test's own (scripts/postgres up --tls) with sslmode=verify-full against
# the test CA works, and its session is encrypted (pg_stat_ssl); the same
# with another CA's certificate, or with a host name the server's
# certificate does not name, stops at once with exit 1 and one line naming
# the target (its password hidden) and libpq's reason, no row written.
source "$(dirname "$0")/lib.sh"
pg() { KPIPE_POSTGRES_STATE="$WORK/postgres" "$KPIPE_SOURCE_DIR/scripts/postgres" "$@"; }
pg up --tls --stop-with-parent >"$WORK/pg.out" 2>"$WORK/pg.err" ||
  fail "cannot start a PostgreSQL with --tls: $(cat "$WORK/pg.err")"
URI=$(tail -n 1 "$WORK/pg.out") # postgresql://kpipe@127.0.0.1:PORT/postgres
CA=$(pg ca)
PORT=${URI##*:}
PORT=${PORT%%/*}
"$KPIPE_SOURCE_DIR/scripts/test-ca" "$WORK/other" >/dev/null # a CA that signed nothing of the server's
# sql's own sessions need no TLS: the server takes plain ones too.
q() { sql "$URI?sslmode=disable" "$1"; }

# --- verified: works, and the session is TLS ------------------------------------------
# kupsert holds its connection open while it waits for input: its own
# backend is looked up by its application name (kupsert[PID]).
VERIFIED="$URI?sslmode=verify-full&sslrootcert=$CA"
mkfifo "$WORK/in"
kupsert --db "$VERIFIED" --table t --key id --batch 1 <"$WORK/in" >"$WORK/out" 2>"$WORK/err" &
upsert=$!
exec 8>"$WORK/in"
echo '{"id":1,"v":"a"}' >&8
# Its first row, or its end (a refused connection: waiting on would only
# time out).
first_row() { ! kill -0 "$upsert" 2>/dev/null || [[ $(q "SELECT count(*) FROM t" 2>/dev/null) == 1 ]]; }
wait_for "kupsert's first row" 30 first_row
kill -0 "$upsert" 2>/dev/null || fail "kupsert ended before its first row: $(cat "$WORK/err")"
assert_eq "$(q "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
  WHERE a.application_name = 'kupsert[$upsert]'")" "t" "kupsert's session is TLS"
echo '{"id":2,"v":"b"}' >&8
exec 8>&-
status=0
wait "$upsert" || status=$?
assert_eq "$status" 0 "kupsert's exit status over verified TLS (stderr: $(cat "$WORK/err"))"
assert_empty "$WORK/err"
assert_eq "$(q "SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM t")" "1=a 2=b" "rows over TLS"

# --- not verified: one line, exit 1, at once ------------------------------------------
# refused WHAT TARGET REASON: kupsert stops with exit 1 (a hang is cut by
# timeout's 124), one line on stderr naming the target without its
# password, then libpq's REASON; nothing written.
refused() {
  local what=$1 target=$2 reason=$3 shown
  shown=${target/kpipe:s3cretpw@/kpipe@}
  expect_exit 1 timeout 60 kupsert --db "$target" --table t --key id <<<'{"id":3,"v":"c"}'
  # The password on the command line is warned of first.
  sed -i "1{/^kupsert: warning: --db's PostgreSQL URI puts a password on the command line, /d}" "$WORK/err"
  assert_eq "$(wc -l <"$WORK/err")" 1 "$what: lines on stderr ($(cat "$WORK/err"))"
  assert_contains "$WORK/err" "kupsert: error: $shown: cannot connect: "
  assert_contains "$WORK/err" "$reason"
  grep -q s3cretpw "$WORK/err" && fail "$what: the password was printed: $(cat "$WORK/err")"
  assert_empty "$WORK/out"
}
WITH_PASSWORD="postgresql://kpipe:s3cretpw@127.0.0.1:$PORT/postgres"
refused "another CA" "$WITH_PASSWORD?sslmode=verify-full&sslrootcert=$WORK/other/ca.crt" \
  "certificate verify failed"
# verify-full checks the name too: the right CA, a host name its
# certificate (127.0.0.1, localhost) does not hold.
refused "another name" \
  "postgresql://kpipe:s3cretpw@kpipe.invalid:$PORT/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=$CA" \
  "does not match host name \"kpipe.invalid\""
assert_eq "$(q "SELECT count(*) FROM t")" 2 "rows after the refusals"
echo "postgres_tls: ok"
