#!/usr/bin/env bash
# Sets up dependencies, builds a preset (default: Release with assertions on) and runs every
# test: units, simulator and CLI tests, properties, the conformance kit, trace replays and a
# 100-seed sweep of every scenario.
# With CI=true (as .ci/run sets it) it then also runs the campaigns CI owns: 200 more seeds of
# every scenario, the code-probe sweep (tools/probe_sweep.sh: fails on a probe no run reaches),
# a short fuzz smoke of every libFuzzer target (fuzz/run_smoke.sh, clang build), the mutation
# runner (tests/mutants/run_mutants.sh) and a small blind mutation-score sample
# (tools/mutation_score.sh), and builds with -Werror.
# Usage: tools/test.sh [preset]   (default | debug | asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
tools/setup.sh
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
# ccache (tools/setup.sh installs it) makes a rebuild of unchanged sources cheap, also in a fresh
# clone at the same path; every CI build below uses it.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake --preset "$preset" -DKVSIM_WERROR="$werror" "${launcher[@]}" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
ctest --preset "$preset" -j"$(nproc)"
echo "== build and ctest took ${SECONDS} s"

if [ "${CI:-}" = "true" ] && [ "$preset" = "default" ]; then
  # The file store makes and removes a file per page; on a disk that discards on unlink that is
  # most of a file-store run's time (a shrink of a file_storage_budget trace: 22 s of system
  # time in /tmp, 2.6 s in /dev/shm). The campaigns below keep their temporary stores on a
  # tmpfs when one with room is there: the same code and files, without the disk's wait.
  if [ -z "${KVSIM_CI_KEEP_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
    [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((2 * 1024 * 1024)) ]; then
    TMPDIR=$(mktemp -d /dev/shm/kvsim-ci-XXXXXX)
    export TMPDIR
    trap 'rm -rf "$TMPDIR"' EXIT
  fi
  # ctest swept seeds 1-100 of every scenario; CI adds the next ${KVSIM_CI_SEEDS:-200}, two
  # scenarios at a time. A failing seed leaves its op trace in build/ci-sweep/.
  seeds="${KVSIM_CI_SEEDS:-200}"
  echo "== [${SECONDS} s] simulator sweep: seeds 101-$((100 + seeds)) of every scenario"
  mkdir -p build/ci-sweep
  ls scenarios/*.json | grep -v mooncake_synthetic |
    xargs -P 2 -I{} build/default/tools/kvsim run {} --seed 101 --seeds "$seeds" \
      --no-progress --trace-dir build/ci-sweep
  echo "== [${SECONDS} s] code probes: every probe reached by a bounded sweep (tools/probe_sweep.sh)"
  tools/probe_sweep.sh build/default/tools/kvsim
  echo "== [${SECONDS} s] fuzz smoke (fuzz/run_smoke.sh ${KVSIM_FUZZ_SECONDS:-20})"
  fuzz/run_smoke.sh "${KVSIM_FUZZ_SECONDS:-20}"
  # The SGLang hunt runs one unit at a time (one Python driver: one core), and so do the
  # mutation runner's hunts and shrinks: side by side they keep both cores busy. The SGLang
  # stage's output is printed when it ends; it fails the run like any stage.
  sglang_log=build/ci-sglang.log
  echo "== [${SECONDS} s] the blind hunt against SGLang's own cache (ctest -L sglang: seed 004 at its parent and fix), beside the mutation runner"
  ( rc=0
    ctest --test-dir "build/$preset" -L sglang --output-on-failure >"$sglang_log" 2>&1 || rc=$?
    echo "== [${SECONDS} s] the SGLang hunt ended (exit $rc)" >>"$sglang_log"
    exit "$rc" ) &
  sglang_pid=$!
  echo "== [${SECONDS} s] mutation runner (tests/mutants/run_mutants.sh --budget ${KVSIM_MUTANT_BUDGET:-60})"
  runner_rc=0
  tests/mutants/run_mutants.sh --budget "${KVSIM_MUTANT_BUDGET:-60}" || runner_rc=$?
  sglang_rc=0
  wait "$sglang_pid" || sglang_rc=$?
  sed 's/^/  [sglang] /' "$sglang_log"
  if [ "$runner_rc" -ne 0 ] || [ "$sglang_rc" -ne 0 ]; then
    echo "CI: the mutation runner exited $runner_rc, the SGLang hunt (ctest -L sglang) $sglang_rc" >&2
    exit 1
  fi
  # A small blind mutation-score sample (docs/mutation-score.md), in the mutation runner's
  # build: fails if the tool breaks, not on the score of 6 mutants.
  echo "== [${SECONDS} s] mutation score sample (tools/mutation_score.sh --sample 6 --budget 20)"
  KVSIM_MUTATION_WORK=build/mutants tools/mutation_score.sh --sample "${KVSIM_MUTATION_SAMPLE:-6}" \
    --seed "${KVSIM_MUTATION_SEED:-1}" --budget "${KVSIM_MUTATION_BUDGET:-20}"
  echo "== CI campaigns done at ${SECONDS} s"
fi
