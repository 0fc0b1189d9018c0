#!/usr/bin/env bash
# Sets up dependencies, builds a preset (default: Release with assertions on) and runs every
# test: units, simulator and CLI tests, properties, the conformance kit, trace replays and a
# 100-seed sweep of every scenario.
# With CI=true (as .ci/run sets it) it then also runs the campaigns CI owns: a short fuzz smoke
# of every libFuzzer target (fuzz/run_smoke.sh, clang build) and the mutation runner
# (tests/mutants/run_mutants.sh), and builds with -Werror.
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

if [ "${CI:-}" = "true" ] && [ "$preset" = "default" ]; then
  echo "== fuzz smoke (fuzz/run_smoke.sh ${KVSIM_FUZZ_SECONDS:-20})"
  fuzz/run_smoke.sh "${KVSIM_FUZZ_SECONDS:-20}"
  echo "== mutation runner (tests/mutants/run_mutants.sh --budget ${KVSIM_MUTANT_BUDGET:-60})"
  tests/mutants/run_mutants.sh --budget "${KVSIM_MUTANT_BUDGET:-60}"
fi
