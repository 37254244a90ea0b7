#!/usr/bin/env bash
# scripts/demo builds the programs it runs and not the test suite, nearly
# half of what a whole build compiles (a newcomer waited 6 min 49 s on two
# cores for unit tests the demo never runs); scripts/build with no target
# still builds everything, as scripts/test needs. Run on a copy of the
# scripts with cmake and scripts/deps stubbed: the stub cmake records what
# it was asked to build, and a stub kbroker that writes nothing ends the
# demo at its first step.
source "$(dirname "$0")/lib.sh"

root=$WORK/root
mkdir -p "$root/scripts" "$root/build/bin" "$WORK/stub"
cp "$KPIPE_SOURCE_DIR/scripts/demo" "$KPIPE_SOURCE_DIR/scripts/build" "$root/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$root/scripts/deps"
printf '#!/bin/sh\nexit 0\n' >"$root/build/bin/kbroker"
printf '#!/bin/sh\necho "cmake $*" >>"%s"\n' "$WORK/cmake.log" >"$WORK/stub/cmake"
chmod +x "$root/scripts/"* "$root/build/bin/kbroker" "$WORK/stub/cmake"

# The demo stops once kbroker has said no address; what it built is logged.
PATH=$WORK/stub:$PATH run 1 "$root/scripts/demo"
grep -qxF "cmake --build $root/build -j2 --target programs" "$WORK/cmake.log" ||
  fail "scripts/demo does not build the target programs alone: $(cat "$WORK/cmake.log")"

: >"$WORK/cmake.log"
PATH=$WORK/stub:$PATH run 0 "$root/scripts/build"
grep -qxF "cmake --build $root/build -j2" "$WORK/cmake.log" ||
  fail "scripts/build without a target does not build everything: $(cat "$WORK/cmake.log")"

# The target exists in the build the suite runs from, and holds every
# program of tools/ (the demo runs most of them).
build=$(cd "$KPIPE_BIN/.." && pwd)
grep -qE '/tools/CMakeFiles/programs\.dir$' "$build/CMakeFiles/TargetDirectories.txt" ||
  fail "no target 'programs' in $build"
# Its dependencies, as the Makefiles scripts/build generates spell them.
if [[ -f $build/CMakeFiles/Makefile2 ]]; then
  for prog in $(programs); do
    grep -qxF "tools/CMakeFiles/programs.dir/all: tools/CMakeFiles/$prog.dir/all" "$build/CMakeFiles/Makefile2" ||
      fail "the target programs does not build $prog"
  done
fi
