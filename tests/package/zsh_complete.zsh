# zsh -f zsh_complete.zsh FPATH_DIR WORD...: what _kpipe offers for the last
# WORD of the command line WORD..., one candidate a line, unfiltered by what
# the word holds so far. The completion system's functions are stubs that
# print what they were given: <files>, <commands>, <message: TEXT>.
fpath=($1 $fpath)
shift
autoload -Uz _kpipe
compadd() {
  # compadd [-S SUFFIX] -a ARRAY...: the arrays' words.
  while [[ $1 == -* && $1 != -a ]]; do
    [[ $1 == -S ]] && shift
    shift
  done
  [[ $1 == -a ]] || { print -u2 "zsh_complete: compadd $*: expected -a"; exit 2; }
  shift
  local name
  for name; do print -rl -- ${(P)name}; done
}
_files() { print -r -- '<files>'; }
_command_names() { print -r -- '<commands>'; }
_message() { print -r -- "<message: $*>"; }
words=("$@")
CURRENT=$#
PREFIX=${words[CURRENT]}
_kpipe
