#!/usr/bin/env bash
# The Debian package (scripts/package): cpack builds it from this build
# directory into a temporary one. It must be named for the project's
# version, the one every program's --version prints; depend on the Debian
# packages of the libraries the programs link; hold every program and
# nothing else in /usr/bin, every man page, both completions and the
# systemd unit; and its programs must run from the unpacked tree. And
# lintian, Debian's checker, finds no error and no warning in it (man pages
# gzipped, a copyright file, a changelog whose first entry is this version).
# Needs KPIPE_SOURCE_DIR, KPIPE_BUILD_DIR and KPIPE_VERSION (ctest sets
# them); exit 77 where there are no Debian tools to pack with.
set -euo pipefail
: "${KPIPE_SOURCE_DIR:?}" "${KPIPE_BUILD_DIR:?}" "${KPIPE_VERSION:?}"
fail() {
  echo "package: $*" >&2
  exit 1
}
for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || {
    echo "package: skipped: no $tool here (scripts/deps installs dpkg-dev)" >&2
    exit 77
  }
done
# Where Debian's tools pack, lintian must judge: a missing lintian fails
# rather than skips, so that a lost install step cannot pass unseen
# (scripts/test and scripts/package install it).
command -v lintian >/dev/null || fail "no lintian here: scripts/deps lintian installs it"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && cpack --config "$KPIPE_BUILD_DIR/CPackConfig.cmake" -G DEB -B "$tmp/out") >"$tmp/cpack.log" 2>&1 ||
  fail "cpack failed: $(cat "$tmp/cpack.log")"
arch=$(dpkg --print-architecture)
deb=$tmp/out/kpipe_${KPIPE_VERSION}_$arch.deb
[[ -f $deb ]] || fail "no $(basename "$deb"), but: $(cd "$tmp/out" && echo *.deb)"

# The control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == kpipe ]] || fail "Package: $(field Package)"
[[ $(field Version) == "$KPIPE_VERSION" ]] || fail "Version: $(field Version), not $KPIPE_VERSION"
[[ $(field Architecture) == "$arch" ]] || fail "Architecture: $(field Architecture)"
depends=$(field Depends)
depends_names=$(sed -E 's/[,|]/\n/g' <<<"$depends" | sed -E 's/^ +//; s/[ (].*//')

programs=()
for main in "$KPIPE_SOURCE_DIR"/tools/*/main.cpp; do
  programs+=("$(basename "$(dirname "$main")")")
done
((${#programs[@]} > 0)) || fail "no programs in $KPIPE_SOURCE_DIR/tools"

# Every path in the package, as installed ("/usr/bin/kwindow"); links as
# "PATH -> TARGET".
dpkg-deb -c "$deb" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }' |
  sed -E 's|^\./|/|; s|/$||' >"$tmp/files"
has() { grep -qxF -- "$1" "$tmp/files" || grep -q -- "^$1 -> " "$tmp/files"; }
expect() { has "$1" || fail "no $1 in the package"; }

for p in "${programs[@]}"; do
  expect "/usr/bin/$p"
  expect "/usr/share/man/man1/$p.1.gz"
  expect "/usr/share/bash-completion/completions/$p"
done
for page in "$KPIPE_SOURCE_DIR"/man/*.[17]; do
  name=$(basename "$page")
  expect "/usr/share/man/man${name##*.}/$name.gz"
done
expect /usr/share/bash-completion/completions/kpipe.bash
expect /usr/share/zsh/vendor-completions/_kpipe
expect /usr/lib/systemd/system/kpipe-pipeline@.service
expect /usr/lib/systemd/system/klag@.service
expect /usr/lib/systemd/system/klag@.timer
expect /usr/share/doc/kpipe/README.md
expect /usr/share/doc/kpipe/copyright
expect /usr/share/doc/kpipe/changelog.gz
expect /usr/share/doc/kpipe/examples/clicks.pipeline
expect /usr/share/doc/kpipe/examples/clicks.env
expect /etc/kpipe
# The programs and nothing else (no test or bench helper) in /usr/bin;
# nothing outside the places above (no header, no library, no stray zsh/
# among the bash completions).
bins=$(sed -nE 's|^/usr/bin/([^ ]+).*|\1|p' "$tmp/files" | sort)
[[ $bins == "$(printf '%s\n' "${programs[@]}" | sort)" ]] ||
  fail "/usr/bin holds $(tr '\n' ' ' <<<"$bins")but the programs are ${programs[*]}"
stray=$(grep -vE '^/(etc|usr|usr/bin|usr/share|usr/lib)$|^/(etc/kpipe|usr/bin/|usr/share/man(/|$)|usr/share/bash-completion(/|$)|usr/share/zsh(/|$)|usr/share/doc(/|$)|usr/lib/systemd(/|$))' "$tmp/files" || true)
[[ -z $stray ]] || fail "unexpected in the package: $stray"
grep -q '^/usr/share/bash-completion/completions/zsh' "$tmp/files" && fail "zsh/ among the bash completions"

# Unpacked into a scratch root, each program runs and prints the version
# the package carries.
root=$tmp/root
dpkg-deb -x "$deb" "$root"
for p in "${programs[@]}"; do
  out=$("$root/usr/bin/$p" --version) || fail "$p --version failed"
  [[ ${out%%$'\n'*} == "$p (kpipe) $KPIPE_VERSION" ]] || fail "$p --version: ${out%%$'\n'*}"
done

# Depends names the Debian package of each library a program links, as
# dpkg-shlibdeps found it: among them librdkafka, SQLite, libpq, fmt,
# simdjson, and the Schema Registry's libcurl, libavro and libprotobuf
# (xxhash is compiled in: XXH_INLINE_ALL).
objdump -p "$root"/usr/bin/* | awk '$1 == "NEEDED" { print $2 }' | sort -u >"$tmp/needed"
for lib in librdkafka libsqlite3 libpq libfmt libsimdjson libcurl libavro libprotobuf; do
  grep -q "^$lib\.so" "$tmp/needed" || fail "no program links $lib"
done
ldd "$root"/usr/bin/* >"$tmp/ldd"
# The package that holds a library, by either name merged /usr gives it.
package_of() {
  local alt=/usr$1
  [[ $1 == /usr/* ]] && alt=${1#/usr}
  { dpkg -S "$1" 2>/dev/null || dpkg -S "$alt" 2>/dev/null; } | sed -n '1s/:.*//p'
}
while read -r so; do
  path=$(awk -v so="$so" '$1 == so && $2 == "=>" { print $3; exit }' "$tmp/ldd")
  [[ -n $path ]] || fail "$so: not found by ldd"
  pkg=$(package_of "$path")
  [[ -n $pkg ]] || fail "no Debian package holds $path"
  grep -qxF "$pkg" <<<"$depends_names" || fail "Depends lacks $pkg (for $so): $depends"
done <"$tmp/needed"

# The changelog's first entry is this version's: a new version needs one.
changelog_version=$(dpkg-parsechangelog -l "$root/usr/share/doc/kpipe/changelog.gz" -S Version) ||
  fail "the changelog does not parse"
[[ $changelog_version == "$KPIPE_VERSION" ]] ||
  fail "the changelog's first entry is $changelog_version, not $KPIPE_VERSION (cmake/debian/changelog)"

# lintian: no error and no warning. A tag that must stay is overridden, with
# its reason, in cmake/debian/ (there is none yet); info and pedantic tags
# are advice, not failures.
lintian --fail-on error,warning --no-tag-display-limit "$deb" >"$tmp/lintian" 2>&1 ||
  fail "lintian: $(grep -v '^running with root privileges' "$tmp/lintian")"

# The maintainer scripts are shell that parses.
dpkg-deb -e "$deb" "$tmp/control"
for script in postinst postrm; do
  [[ -x $tmp/control/$script ]] || fail "no executable $script"
  sh -n "$tmp/control/$script" || fail "$script does not parse"
done

# The completions, from the unpacked tree: bash's by each program's name.
for p in "${programs[@]}"; do
  (
    # shellcheck source=/dev/null
    source "$root/usr/share/bash-completion/completions/$p"
    [[ $(complete -p "$p") == *"-F _kpipe_complete"* ]]
  ) 2>/dev/null || fail "the bash completion of $p from the package does not complete $p"
done
# zsh's handles the options whose values the bash one knows, with the same
# values (the rest comes from the programs themselves in both).
arms() { sed -nE 's/^ +(--[a-z-]+( \| --[a-z-]+)*)\).*/\1/p' "$1" | tr -d ' ' | tr '|' '\n' | sort; }
bash_file=$KPIPE_SOURCE_DIR/completions/kpipe.bash
zsh_file=$KPIPE_SOURCE_DIR/completions/zsh/_kpipe
diff <(arms "$bash_file") <(arms "$zsh_file") >"$tmp/diff" ||
  fail "completions/zsh/_kpipe and completions/kpipe.bash complete the values of other options: $(cat "$tmp/diff")"
bash_values() {
  sed -nE 's/^ +(--[a-z-]+)\) COMPREPLY=\(\$\(compgen -W "([^"]*)".*/\1: \2/p
    s/^ +([a-z][a-z |]*)\) w="([^"]*)".*/\1: \2/p' "$bash_file" | sort
}
zsh_values() {
  sed -nE 's/^ +(--[a-z-]+)\) vals=\(([^)]*)\).*/\1: \2/p
    s/^ +([a-z][a-z |]*)\) vals=\(([^)]*)\).*/\1: \2/p' "$zsh_file" | sort
}
diff <(bash_values) <(zsh_values) >"$tmp/diff" ||
  fail "completions/zsh/_kpipe offers other values than completions/kpipe.bash: $(cat "$tmp/diff")"
if command -v zsh >/dev/null; then
  complete_zsh() {
    PATH=$root/usr/bin:$PATH zsh -f "$KPIPE_SOURCE_DIR/tests/package/zsh_complete.zsh" \
      "$root/usr/share/zsh/vendor-completions" "$@" | tr '\n' ' '
  }
  [[ $(complete_zsh kconsume --format '') == "envelope value " ]] ||
    fail "zsh: kconsume --format: $(complete_zsh kconsume --format '')"
  [[ $(complete_zsh kdlq list --format '') == "table ndjson " ]] ||
    fail "zsh: kdlq list --format: $(complete_zsh kdlq list --format '')"
  [[ $(complete_zsh kjoin --table '') == "postgresql:// kafka: sqlite: <files> " ]] ||
    fail "zsh: kjoin --table: $(complete_zsh kjoin --table '')"
  [[ $(complete_zsh kupsert --table '') == "<files> " ]] ||
    fail "zsh: kupsert --table: $(complete_zsh kupsert --table '')"
  [[ $(complete_zsh kcheckpoint commit --each '') == "<commands> " ]] ||
    fail "zsh: kcheckpoint commit --each: $(complete_zsh kcheckpoint commit --each '')"
  # Subcommands and options come from the program.
  subs=$("$root/usr/bin/kdlq" --completion-helper | grep -v '^--' | tr '\n' ' ')
  [[ $(complete_zsh kdlq '') == "$subs" ]] || fail "zsh: kdlq: $(complete_zsh kdlq '')"
  opts=$("$root/usr/bin/kdlq" list --completion-helper | grep '^--' | tr '\n' ' ')
  [[ $(complete_zsh kdlq list --s) == "$opts" ]] || fail "zsh: kdlq list --s: $(complete_zsh kdlq list --s)"
else
  echo "package: no zsh here: its completion is compared with bash's, not run" >&2
fi

# The example pipeline is bash that parses; the unit is one systemd accepts.
bash -n "$root/usr/share/doc/kpipe/examples/clicks.pipeline" || fail "examples/clicks.pipeline does not parse"
unit=$root/usr/lib/systemd/system/kpipe-pipeline@.service
if command -v systemd-analyze >/dev/null; then
  # verify loads the template as kpipe-pipeline@i.service; it needs no
  # running systemd, but checks that ExecStart's program exists (here, on
  # this machine). Man pages are not installed here: --man=no.
  systemd-analyze verify --man=no "$unit" >"$tmp/verify" 2>&1 || fail "systemd-analyze verify: $(cat "$tmp/verify")"
  ! grep 'kpipe-pipeline' "$tmp/verify" || fail "systemd-analyze verify warns (above)"
  # klag@.service runs klag from systemd's search path (/usr/bin once the
  # package is installed): verified here with the unpacked klag's path.
  mkdir -p "$tmp/units"
  sed "s|^ExecStart=klag |ExecStart=$root/usr/bin/klag |" "$root/usr/lib/systemd/system/klag@.service" \
    >"$tmp/units/klag@.service"
  cp "$root/usr/lib/systemd/system/klag@.timer" "$tmp/units/"
  systemd-analyze verify --man=no "$tmp/units/klag@.service" "$tmp/units/klag@.timer" \
    >"$tmp/verify" 2>&1 || fail "systemd-analyze verify: $(cat "$tmp/verify")"
  ! grep 'klag@' "$tmp/verify" || fail "systemd-analyze verify warns of klag's units (above)"
else
  echo "package: no systemd-analyze here: the unit is not verified" >&2
fi
echo "package: $(basename "$deb"): ${#programs[@]} programs; Depends: $depends"
