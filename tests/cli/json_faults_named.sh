#!/usr/bin/env bash
# A line that is not JSON is refused for what is wrong with it, in words a
# user can act on: simdjson's own codes said "malformed structure" of a BOM
# and of NaN, and "truncated object or array" of content after the value.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

printf '\xef\xbb\xbf{"id":1}\n' >bom.ndjson
printf '{"id":1} trailing\n' >trailing.ndjson
printf '{"id":1}\0\n' >nul.ndjson
printf '{"id":nul}\n' >literal.ndjson
printf '{"id":NaN}\n' >nan.ndjson
printf '{"id":-Infinity}\n' >inf.ndjson
printf '{"id":"\\ud800"}\n' >surrogate.ndjson
{
  head -c 100000 /dev/zero | tr '\0' '['
  head -c 100000 /dev/zero | tr '\0' ']'
  echo
} >deep.ndjson

check() {  # FILE REASON: kdlq guard and kdedup both give REASON
  run 65 kdlq guard --require .id "$1"
  expect_stderr "kdlq: error: $1: line 1: not valid JSON: $2
"
  [[ $1 == deep.ndjson ]] && return  # kdedup reads only .id: no depth to refuse
  run 65 kdedup --key .id "$1"
  expect_stderr "kdedup: error: $1: line 1: not valid JSON: $2
"
}
check bom.ndjson 'the line begins with a UTF-8 byte order mark (BOM)'
check trailing.ndjson 'content after the value'
check nul.ndjson 'a NUL byte after the value'
check literal.ndjson "'nul' is not a JSON value"
check nan.ndjson 'NaN is not JSON'
check inf.ndjson '-Infinity is not JSON'
check surrogate.ndjson 'a lone surrogate \ud800'
check deep.ndjson 'nesting deeper than 1024'

# One short line for a bad --max-line-bytes, not CLI11's 309-digit range.
run 2 kdedup --key .id --max-line-bytes 0 </dev/null
expect_stderr "kdedup: error: --max-line-bytes: must be at least 1; see 'kdedup --help'
"
