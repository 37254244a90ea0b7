#!/usr/bin/env bash
# Which AWS credentials kconsume and kproduce sign Kinesis calls with, from
# each place the SDKs look, in their order (issue 37): the environment, a
# profile in the shared files, web identity through STS, the instance role
# through IMDSv2. kinesis-mock checks no signature, so the calls go through
# a recording proxy (bin/aws_standins.py) that logs each one's access key id
# (the Authorization header's Credential=), its region and its
# X-Amz-Security-Token; STS and the instance metadata service are local
# stand-ins of the same script. In each case one record is written and all
# are read back (kconsume -e), and every call must carry that case's keys
# alone. With no source at all, and when STS or Kinesis refuse, the
# programs fail with one line; across all runs (all with -v) no secret key,
# session token or web identity token is ever printed.
source "$(dirname "$0")/lib.sh"

# Nothing of the machine's own AWS setup reaches a case: each names what it
# uses, and has an empty HOME of its own (no ~/.aws).
for name in $(compgen -e); do
  [[ $name != AWS_* ]] || unset "$name"
done

KINESIS=$(kinesis_endpoint)
STREAM="kpipe-$RUN_ID"
# kinesis-mock keeps a stream in the region its requests are signed for:
# every case must sign for this one to find it.
REGION=us-east-1
kinesis_api CreateStream "$(jq -nc --arg s "$STREAM" '{StreamName: $s, ShardCount: 1}')" >/dev/null
is_active() {
  [[ $(kinesis_api DescribeStreamSummary "$(jq -nc --arg s "$STREAM" '{StreamName: $s}')" |
    jq -r .StreamDescriptionSummary.StreamStatus) == ACTIVE ]]
}
wait_for "$STREAM to be ACTIVE" 30 is_active

# --- the credentials of each source, all distinct --------------------------------
# Secrets look like AWS's (base64 with / and +, tokens with =), so that
# they also travel through the form encoding, XML and JSON unharmed.
ENV_KEY=AKIAENVIRONMENT00001 ENV_SECRET='envSecret/K7MDENG+bPxRfiCYEXAMPLEKEY01'
ENV_TOKEN='IQoJenvSessionToken//+EXAMPLETOKEN01=='
PROFILE_KEY=AKIAPROFILEKEYID0002 PROFILE_SECRET='profileSecret/K7MDENG+bPxRfiEXAMPLE02'
PROFILE_TOKEN='IQoJprofileSessionToken/+EXAMPLETOKEN02='
DEFAULT_KEY=AKIADEFAULTPROFILE09 DEFAULT_SECRET='defaultSecret/K7MDENG+bPxRfiEXAMPLE09'
STS_KEY=ASIASTSWEBIDENTITY03 STS_SECRET='stsSecret/K7MDENG+bPxRfiCYzEXAMPLEKEY03'
STS_TOKEN='FwoGZXIvYXdzEstsSessionToken//+EXAMPLETOKEN03=='
WEB_TOKEN='eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJrcGlwZSJ9.webIdentitySignature-EXAMPLE04'
ROLE_ARN=arn:aws:iam::000000000000:role/kpipe-reader
IMDS_KEY=ASIAINSTANCEROLEKY05 IMDS_SECRET='imdsSecret/K7MDENG+bPxRfiCYzEXAMPLEKEY05'
IMDS_TOKEN='IQoJimdsSessionToken//+EXAMPLETOKEN05=='
IMDS_ROLE=kpipe-node-role
METADATA_TOKEN='AQAEAimdsMetadataSessionToken-EXAMPLE06=='
REFUSED_KEY=AKIAREFUSEDKEYID0007 REFUSED_SECRET='refusedSecret/K7MDENG+bPxRfiEXAMPLE07'
REFUSED_TOKEN='IQoJrefusedSessionToken/+EXAMPLETOKEN07='
SECRETS=("$ENV_SECRET" "$ENV_TOKEN" "$PROFILE_SECRET" "$PROFILE_TOKEN" "$DEFAULT_SECRET" "$STS_SECRET"
  "$STS_TOKEN" "$WEB_TOKEN" "$IMDS_SECRET" "$IMDS_TOKEN" "$METADATA_TOKEN" "$REFUSED_SECRET" "$REFUSED_TOKEN")

# The shared files, away from HOME: AWS_SHARED_CREDENTIALS_FILE and
# AWS_CONFIG_FILE name them. The default profile has keys of its own, so
# that taking it instead of AWS_PROFILE's shows.
cat >"$WORK/credentials" <<EOF
[default]
aws_access_key_id = $DEFAULT_KEY
aws_secret_access_key = $DEFAULT_SECRET

[kpipe-test]
aws_access_key_id = $PROFILE_KEY
aws_secret_access_key = $PROFILE_SECRET
aws_session_token = $PROFILE_TOKEN
EOF
cat >"$WORK/config" <<EOF
[default]
region = eu-west-1

[profile kpipe-test]
region = $REGION
output = json
EOF
# A projected service account token, as Kubernetes writes it; a final
# newline, as an editor leaves, is no part of the token.
printf '%s\n' "$WEB_TOKEN" >"$WORK/web-identity-token"
jq -n --arg k "$STS_KEY" --arg s "$STS_SECRET" --arg t "$STS_TOKEN" \
  '{AccessKeyId: $k, SecretAccessKey: $s, SessionToken: $t}' >"$WORK/sts.json"
jq -n --arg k "$IMDS_KEY" --arg s "$IMDS_SECRET" --arg t "$IMDS_TOKEN" \
  '{AccessKeyId: $k, SecretAccessKey: $s, Token: $t}' >"$WORK/imds.json"

# --- the stand-ins ------------------------------------------------------------------
STANDINS="$KPIPE_SOURCE_DIR/tests/integration/bin/aws_standins.py"
# start_standin NAME ARGS...: aws_standins.py ARGS in the background (stopped
# when the test ends), its diagnostics in $WORK/NAME.err. Its first line,
# read through a FIFO, is its URL, printed once it listens: URL is set to it.
start_standin() {
  local name=$1 fd
  shift
  mkfifo "$WORK/$name.url"
  python3 "$STANDINS" "$@" >"$WORK/$name.url" 2>"$WORK/$name.err" &
  exec {fd}<"$WORK/$name.url"
  read -r -t 10 URL <&"$fd" || fail "the $name stand-in did not start: $(cat "$WORK/$name.err")"
  exec {fd}<&-
  [[ $URL == http://127.0.0.1:* ]] || fail "the $name stand-in printed '$URL'"
}
start_standin proxy proxy "$WORK/proxy.log" "$KINESIS" "$REFUSED_KEY"
PROXY=$URL
start_standin sts sts "$WORK/sts.log" "$WORK/sts.json"
STS=$URL
start_standin sts-refusing sts "$WORK/sts-refusing.log" "$WORK/sts.json" refuse
STS_REFUSING=$URL
start_standin imds imds "$WORK/imds.log" "$WORK/imds.json" "$IMDS_ROLE" "$METADATA_TOKEN"
IMDS=$URL

# --- running a case -------------------------------------------------------------------
# begin_case NAME VAR=VALUE...: the next case's environment, CASE_ENV: an
# empty HOME of its own and these variables (no other AWS_* one is set).
# The stand-ins' logs start empty.
begin_case() {
  CASE=$1
  shift
  mkdir "$WORK/home-$CASE"
  CASE_ENV=("HOME=$WORK/home-$CASE" "$@")
  : >"$WORK/proxy.log"
  : >"$WORK/sts.log"
  : >"$WORK/sts-refusing.log"
  : >"$WORK/imds.log"
}

# run_case STATUS PROGRAM ARGS...: PROGRAM -v on the stream through the
# proxy, in the case's environment, expected to exit STATUS (expect_exit:
# its output in $WORK/out and $WORK/err). Bounded: a hang fails the test
# rather than holding it. All output is kept for the secrets' check.
run_case() {
  local want=$1 program=$2
  shift 2
  expect_exit "$want" timeout -k 5 60 env "${CASE_ENV[@]}" \
    "$program" -v -t "kinesis:$STREAM" --endpoint "$PROXY" "$@"
  { echo "--- $CASE: $program"; cat "$WORK/out"; } >>"$WORK/all.out"
  { echo "--- $CASE: $program"; cat "$WORK/err"; } >>"$WORK/all.err"
}

# roundtrip SOURCE: kproduce writes one record, {"f": CASE}, and kconsume -e
# reads back every record the cases wrote so far; each says (-v) where its
# credentials came from, SOURCE, never what they are, and what it did.
WRITTEN=()
roundtrip() {
  local found="kinesis stream '$STREAM' in $REGION at $PROXY, credentials from $1"
  jq -nc --arg f "$CASE" '{f: $f}' >"$WORK/$CASE.ndjson"
  run_case 0 kproduce -k .f "$WORK/$CASE.ndjson"
  assert_eq "$(cat "$WORK/err")" "kproduce: $found"$'\n'"kproduce: produced 1 records to '$STREAM'" \
    "case $CASE: kproduce's stderr"
  WRITTEN+=("$CASE")
  run_case 0 kconsume -e
  assert_eq "$(cat "$WORK/err")" "kconsume: $found"$'\n'"kconsume: consumed ${#WRITTEN[@]} records" \
    "case $CASE: kconsume's stderr"
  assert_eq "$(jq -r .value.f "$WORK/out" | sort | paste -sd ' ')" \
    "$(printf '%s\n' "${WRITTEN[@]}" | sort | paste -sd ' ')" "case $CASE: the records read back"
}

# signed_with KEY_ID TOKEN: every call the proxy saw in this case was
# signed with KEY_ID for Kinesis in REGION and carried TOKEN as
# X-Amz-Security-Token ("-": none), and the writes and the reads were there.
signed_with() {
  assert_eq "$(jq -r '"\(.key_id) \(.region) \(.service) \(.token // "-")"' "$WORK/proxy.log" | sort -u)" \
    "$1 $REGION kinesis $2" "case $CASE: the credentials of the calls to Kinesis (key id, region, service, token)"
  local targets
  targets=$(jq -r .target "$WORK/proxy.log" | sort -u | paste -sd ' ')
  [[ " $targets " == *" Kinesis_20131202.PutRecords "* && " $targets " == *" Kinesis_20131202.GetRecords "* ]] ||
    fail "case $CASE: the proxy saw no PutRecords or no GetRecords: $targets"
}

# not_asked NAME...: these stand-ins' logs are empty (a source later in
# the chain was never asked).
not_asked() {
  local name
  for name in "$@"; do
    [[ ! -s "$WORK/$name.log" ]] || fail "case $CASE: $name was asked, though an earlier source has keys: $(head -c 500 "$WORK/$name.log")"
  done
}

# one_line_error TEXT: the failed run printed nothing on stdout and one line
# on stderr (-v adds none of its own here), holding TEXT.
one_line_error() {
  assert_empty "$WORK/out"
  assert_eq "$(lines "$WORK/err")" 1 "case $CASE: lines on stderr ($(cat "$WORK/err"))"
  assert_contains "$WORK/err" "$1"
}

# --- 1. the environment's keys, with a session token -----------------------------
begin_case environment AWS_REGION=$REGION AWS_ACCESS_KEY_ID=$ENV_KEY \
  AWS_SECRET_ACCESS_KEY="$ENV_SECRET" AWS_SESSION_TOKEN="$ENV_TOKEN"
roundtrip environment
signed_with "$ENV_KEY" "$ENV_TOKEN"

# --- 2. a profile of the shared files: keys and token from the credentials
# file, the region from the config file (no AWS_REGION). Web identity is set
# up too, and comes after the profile.
begin_case profile AWS_PROFILE=kpipe-test AWS_SHARED_CREDENTIALS_FILE="$WORK/credentials" \
  AWS_CONFIG_FILE="$WORK/config" AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-identity-token" \
  AWS_ROLE_ARN=$ROLE_ARN AWS_ENDPOINT_URL_STS="$STS" AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS"
roundtrip "profile 'kpipe-test'"
signed_with "$PROFILE_KEY" "$PROFILE_TOKEN"
not_asked sts imds

# --- 3. the environment wins over the profile (and all after it); the
# profile's session token must not join the environment's keys, which
# have none.
begin_case environment-over-profile AWS_REGION=$REGION AWS_ACCESS_KEY_ID=$ENV_KEY \
  AWS_SECRET_ACCESS_KEY="$ENV_SECRET" AWS_PROFILE=kpipe-test AWS_SHARED_CREDENTIALS_FILE="$WORK/credentials" \
  AWS_CONFIG_FILE="$WORK/config" AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-identity-token" \
  AWS_ROLE_ARN=$ROLE_ARN AWS_ENDPOINT_URL_STS="$STS" AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS"
roundtrip environment
signed_with "$ENV_KEY" -
not_asked sts imds

# --- 4. web identity: the token file's token exchanged at the STS
# stand-in (AWS_ENDPOINT_URL_STS), once by each program (the keys last an
# hour); the instance role, after it, is not asked.
begin_case web-identity AWS_REGION=$REGION AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-identity-token" \
  AWS_ROLE_ARN=$ROLE_ARN AWS_ROLE_SESSION_NAME=kpipe-test-session AWS_ENDPOINT_URL_STS="$STS" \
  AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS"
roundtrip "web identity (role '$ROLE_ARN')"
signed_with "$STS_KEY" "$STS_TOKEN"
not_asked imds
want=$(jq -nc --arg r "$ROLE_ARN" --arg t "$WEB_TOKEN" '{path: "/", content_type: "application/x-www-form-urlencoded",
  action: "AssumeRoleWithWebIdentity", version: "2011-06-15", role_arn: $r, session: "kpipe-test-session", token: $t}')
assert_eq "$(jq -c . "$WORK/sts.log")" "$want"$'\n'"$want" "case $CASE: what STS was sent (kproduce, then kconsume)"

# --- 4b. without AWS_ENDPOINT_URL_STS, STS is asked at AWS_ENDPOINT_URL
# (--endpoint still names Kinesis's); with no AWS_ROLE_SESSION_NAME, the
# session is named by kpipe.
begin_case web-identity-endpoint-url AWS_REGION=$REGION AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-identity-token" \
  AWS_ROLE_ARN=$ROLE_ARN AWS_ENDPOINT_URL="$STS"
roundtrip "web identity (role '$ROLE_ARN')"
signed_with "$STS_KEY" "$STS_TOKEN"
assert_eq "$(jq -r '"\(.role_arn) \(.token) \(.session | test("^kpipe-[0-9]+$"))"' "$WORK/sts.log" | sort -u)" \
  "$ROLE_ARN $WEB_TOKEN true" "case $CASE: what STS was sent (role, token, a session name of kpipe's)"

# --- 5. the instance role through IMDSv2, nothing else set up: a session
# token first (PUT, with its TTL), then the role, then its keys, each GET
# with the token (the stand-in refuses one without); once by each program.
begin_case instance-role AWS_REGION=$REGION AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS"
roundtrip "instance role '$IMDS_ROLE'"
signed_with "$IMDS_KEY" "$IMDS_TOKEN"
jq -c --arg t "$METADATA_TOKEN" 'if .method == "GET" then .token |= (if . == $t then "TOKEN" else . end) else . end' \
  "$WORK/imds.log" >"$WORK/imds.got"
for program in kproduce kconsume; do
  cat <<EOF
{"method":"PUT","path":"/latest/api/token","ttl":"21600"}
{"method":"GET","path":"/latest/meta-data/iam/security-credentials/","token":"TOKEN"}
{"method":"GET","path":"/latest/meta-data/iam/security-credentials/$IMDS_ROLE","token":"TOKEN"}
EOF
done >"$WORK/imds.want"
assert_files_equal "$WORK/imds.got" "$WORK/imds.want"

# --- 6. no credentials anywhere (the instance metadata service turned off,
# HOME empty): one line saying where credentials may come from, and nothing
# sent to Kinesis unsigned. The status is 2, a usage error in kpipe's one
# table (kpipe(7), EXIT STATUS), as for a missing region: what is wrong is
# the setup, not a service.
begin_case none AWS_REGION=$REGION AWS_EC2_METADATA_DISABLED=true
run_case 2 kconsume -e
one_line_error "kconsume: error: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with AWS_PROFILE"
for where in AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN "instance metadata service"; do
  assert_contains "$WORK/err" "$where"
done
assert_empty "$WORK/proxy.log"

# --- 7. STS refuses the web identity token: a failure naming STS and its
# answer, and no call to Kinesis.
begin_case sts-refuses AWS_REGION=$REGION AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-identity-token" \
  AWS_ROLE_ARN=$ROLE_ARN AWS_ENDPOINT_URL_STS="$STS_REFUSING"
run_case 1 kconsume -e
one_line_error "kconsume: error: web identity (role '$ROLE_ARN'): STS at $STS_REFUSING refused AssumeRoleWithWebIdentity: HTTP 403: AccessDenied"
assert_eq "$(jq -r .token "$WORK/sts-refusing.log")" "$WEB_TOKEN" "case $CASE: the token STS was sent"
assert_empty "$WORK/proxy.log"

# --- 8. Kinesis refuses the keys (UnrecognizedClientException, as for keys
# it does not know): both programs fail with the service's word.
begin_case kinesis-refuses AWS_REGION=$REGION AWS_ACCESS_KEY_ID=$REFUSED_KEY \
  AWS_SECRET_ACCESS_KEY="$REFUSED_SECRET" AWS_SESSION_TOKEN="$REFUSED_TOKEN"
run_case 1 kconsume -e
assert_empty "$WORK/out"
assert_contains "$WORK/err" "UnrecognizedClientException"
jq -nc '{f: "refused"}' >"$WORK/refused.ndjson"
run_case 1 kproduce -k .f "$WORK/refused.ndjson"
assert_contains "$WORK/err" "UnrecognizedClientException"
assert_eq "$(jq -r '"\(.key_id) \(.token)"' "$WORK/proxy.log" | sort -u)" "$REFUSED_KEY $REFUSED_TOKEN" \
  "case $CASE: the credentials of the refused calls"

# --- no secret, in any run's output ---------------------------------------------------
for secret in "${SECRETS[@]}"; do
  if grep -qF -- "$secret" "$WORK/all.out" "$WORK/all.err"; then
    fail "a secret was printed: $(grep -nF -- "$secret" "$WORK/all.out" "$WORK/all.err" | head -3)"
  fi
done
# The check covers what -v adds: the runs did write it.
assert_contains "$WORK/all.err" "kconsume: consumed ${#WRITTEN[@]} records"

kinesis_api DeleteStream "$(jq -nc --arg s "$STREAM" '{StreamName: $s}')" >/dev/null
