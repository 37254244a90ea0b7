# bash completion for the kpipe programs. Options and subcommands come from
# the programs themselves (PROG [SUB] --completion-helper), so this file
# never goes stale; only the values of a few options are listed here.
_kpipe_complete() {
  local cur prev prog sub="" helper subs w
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  prog=${COMP_WORDS[0]}
  helper=$("$prog" --completion-helper 2>/dev/null) || return
  subs=$(grep -v '^--' <<<"$helper")
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    if [[ -n $subs ]] && grep -qxF -- "$w" <<<"$subs"; then
      sub=$w
      helper=$("$prog" "$sub" --completion-helper 2>/dev/null)
      break
    fi
  done
  case $prev in
    --on-error) COMPREPLY=($(compgen -W "fail dlq skip" -- "$cur")); return ;;
    --format)
      # Each program's own formats, as its --help and man page list them.
      case ${prog##*/} in
        kconsume) w="envelope value" ;;
        klag) w="table ndjson prometheus" ;;
        kdlq | kcheckpoint) w="table ndjson" ;;
        *) w="" ;;
      esac
      COMPREPLY=($(compgen -W "$w" -- "$cur")); return ;;
    --key-format | --value-format)
      # kproduce encodes only what a schema or JSON says (kproduce(1)).
      w="json avro protobuf json-schema"
      [[ ${prog##*/} == kconsume ]] && w+=" string bytes"
      COMPREPLY=($(compgen -W "$w" -- "$cur")); return ;;
    --avro-json) COMPREPLY=($(compgen -W "plain standard" -- "$cur")); return ;;
    --registry) COMPREPLY=($(compgen -W "http:// https://" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --registry-auth | --subject | --key-subject) return ;;
    --from) COMPREPLY=($(compgen -W "earliest latest" -- "$cur")); return ;;
    --isolation) COMPREPLY=($(compgen -W "read_committed read_uncommitted" -- "$cur")); return ;;
    --transactional-id) return ;;  # kproduce: a name of the user's choosing
    --explicit-hash-key) return ;; # kproduce: a field path, as -k's
    -t | --topic)
      # A topic's name, or a Kinesis stream (kconsume, kproduce, klag).
      case ${prog##*/} in
        kconsume | kproduce | klag) COMPREPLY=($(compgen -W "kinesis:" -- "$cur")); compopt -o nospace 2>/dev/null ;;
      esac
      return ;;
    --region) return ;;            # an AWS region
    --to) COMPREPLY=($(compgen -W "kafka: kinesis:" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --endpoint) COMPREPLY=($(compgen -W "https:// http://" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --instance) return ;;          # kconsume: an instance's name of the user's choosing
    --efo) return ;;               # kconsume: a Kinesis consumer's name of the user's choosing
    --until) return ;;             # kconsume: an offset or @TIME; kdlq: a time
    --time-format) COMPREPLY=($(compgen -W "rfc3339 ms" -- "$cur")); return ;;
    --time-unit) COMPREPLY=($(compgen -W "s ms us ns" -- "$cur")); return ;;
    --mode) COMPREPLY=($(compgen -W "upsert ignore" -- "$cur")); return ;;
    --on-miss) COMPREPLY=($(compgen -W "keep drop dlq" -- "$cur")); return ;;
    --by) COMPREPLY=($(compgen -W "reason stage topic hour" -- "$cur")); return ;;
    --fail-on) COMPREPLY=($(compgen -W "WARN STALL STOP REWIND" -- "$cur")); return ;;
    --uncommitted) COMPREPLY=($(compgen -W "earliest latest ignore" -- "$cur")); return ;;
    --granularity) COMPREPLY=($(compgen -W "partition topic" -- "$cur")); return ;;
    --metric-names) COMPREPLY=($(compgen -W "kpipe kafka_exporter" -- "$cur")); return ;;
    --each) COMPREPLY=($(compgen -c -- "$cur")); return ;;  # kcheckpoint commit: a command
    --dlq | --state | --db | --table)
      # A file, or a PostgreSQL server (kpipe(7), STORES); --dlq also a topic
      # or a Kinesis stream, kjoin's --table a topic, a Kinesis stream or an
      # SQLite file's table (kjoin(1)).
      # kupsert's --table is a table's name: files, as before.
      w=postgresql://
      [[ $prev == --dlq ]] && w+=" kafka: kinesis:"
      if [[ $prev == --table ]]; then
        [[ ${prog##*/} == kjoin ]] || { COMPREPLY=($(compgen -f -- "$cur")); return; }
        w+=" kafka: kinesis: sqlite:"
      fi
      COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "$w" -- "$cur"))
      [[ ${#COMPREPLY[@]} -eq 1 && (${COMPREPLY[0]} == *: || ${COMPREPLY[0]} == *://) ]] &&
        compopt -o nospace 2>/dev/null
      return ;;
    --config | --history | --late | --dups | --bootstrap-file | --control | --schema | --registry-ca)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(grep '^--' <<<"$helper")" -- "$cur"))
  elif [[ -z $sub && -n $subs ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _kpipe_complete kbroker kconsume kproduce kwindow kdedup kjoin kupsert kcheckpoint klag kdlq
