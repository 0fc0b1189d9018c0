#!/bin/sh
# The Python module's tests under ThreadSanitizer (outside the default CI run: a TSan build of
# the core and the module takes minutes on 2 cores, and TSan slows each call ~10x).
#
#   python/tsan/run.sh [build dir, default build/tsan] [pytest args, default the thread tests]
#
# Builds kvsim_python with -fsanitize=thread (the core included, so the tree's own accesses are
# watched) and runs pytest with libtsan preloaded: CPython is not instrumented, but its GIL and
# the tree's mutex are pthread primitives TSan intercepts, so a race between a GIL-free call and
# a Python-side read is reported. Any report fails the run (exitcode=66).
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build/tsan}
[ $# -gt 0 ] && shift
flags="-fsanitize=thread -fno-omit-frame-pointer -g -O1 -include $here/python/tsan/no_simd_clones.h"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DKVSIM_TESTS=OFF -DKVSIM_BENCH=OFF -DKVSIM_TOOLS=OFF -DKVSIM_PYTHON=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$build" -j2 --target kvsim_python
tsan=$(g++ -print-file-name=libtsan.so)
[ $# -gt 0 ] || set -- "$here/python/tests/test_threads.py" "$here/python/tests/test_module.py"
# The module's thread tests start child interpreters: they inherit the preload and the options.
LD_PRELOAD=$tsan TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0 ${TSAN_OPTIONS:-}" \
  PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"
