#!/usr/bin/env bash
# Sets up dependencies, builds the default preset (Release, assertions on) and runs every test.
# Usage: tools/test.sh [preset]   (default | debug | asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
tools/setup.sh
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
cmake --preset "$preset" -DKVSIM_WERROR="$werror" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
ctest --preset "$preset" -j"$(nproc)"
