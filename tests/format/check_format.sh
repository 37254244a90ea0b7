#!/usr/bin/env bash
# Every C++ file as .clang-format lays it out, so that the style file means
# something: the test lists the files clang-format would change. Fix with
#   git ls-files '*.cpp' '*.h' | xargs clang-format -i
set -euo pipefail
root=${KPIPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is not installed (scripts/deps installs it)"
  exit 77
fi
mapfile -t files < <(find lib tools tests bench -name '*.cpp' -o -name '*.h' | sort)
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($(clang-format --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "format: run: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format lays them out"
