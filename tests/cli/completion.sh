#!/usr/bin/env bash
# The bash completion offers each program's own values: kconsume's
# --format takes envelope or value, not klag's formats.
source "$(dirname "$0")/lib.sh"
source "$KPIPE_SOURCE_DIR/completions/kpipe.bash"

# complete WORD...: the completions of the last word, one line each.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _kpipe_complete
  printf '%s\n' "${COMPREPLY[@]}"
}

# Stores: a PostgreSQL target beside files (kpipe(7), STORES).
[[ $(complete_words kupsert --db pos) == postgresql:// ]] ||
  fail "kupsert --db pos: $(complete_words kupsert --db pos)"
[[ $(complete_words kdedup --dlq kaf) == kafka: ]] ||
  fail "kdedup --dlq kaf: $(complete_words kdedup --dlq kaf)"
[[ $(complete_words kdedup --dlq kin) == kinesis: ]] ||
  fail "kdedup --dlq kin: $(complete_words kdedup --dlq kin)"
# kdlq replay's targets: a topic or a Kinesis stream.
[[ $(complete_words kdlq replay --to '') == $'kafka:\nkinesis:' ]] ||
  fail "kdlq replay --to: $(complete_words kdlq replay --to '')"

[[ $(complete_words kconsume --format '') == $'envelope\nvalue' ]] ||
  fail "kconsume --format: $(complete_words kconsume --format '')"
[[ $(complete_words "$KPIPE_BIN/kconsume" -t events --format v) == value ]] ||
  fail "kconsume --format v: $(complete_words "$KPIPE_BIN/kconsume" -t events --format v)"
[[ $(complete_words klag --format '') == $'table\nndjson\nprometheus' ]] ||
  fail "klag --format: $(complete_words klag --format '')"
[[ $(complete_words kdlq list --format '') == $'table\nndjson' ]] ||
  fail "kdlq list --format: $(complete_words kdlq list --format '')"
[[ $(complete_words kcheckpoint show --format '') == $'table\nndjson' ]] ||
  fail "kcheckpoint show --format: $(complete_words kcheckpoint show --format '')"
# Options still come from the program itself.
# kcheckpoint history's --plot (issue 38) is the program's own option, not
# its siblings'.
[[ $(complete_words kcheckpoint history --pl) == --plot ]] ||
  fail "kcheckpoint history --pl: $(complete_words kcheckpoint history --pl)"
[[ -z $(complete_words kcheckpoint show --pl) ]] ||
  fail "kcheckpoint show --pl: $(complete_words kcheckpoint show --pl)"
# klag's --plot (issue 38), on the sampling form and on status alike.
[[ $(complete_words klag --pl) == --plot ]] || fail "klag --pl: $(complete_words klag --pl)"
[[ $(complete_words klag status --pl) == --plot ]] ||
  fail "klag status --pl: $(complete_words klag status --pl)"
[[ $(complete_words kupsert --ke) == --key ]] || fail "kupsert --ke: $(complete_words kupsert --ke)"
