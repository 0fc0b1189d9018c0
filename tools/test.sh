#!/usr/bin/env bash
# Sets up dependencies, builds a preset (default: Release with assertions on) and runs every
# test: units, simulator and CLI tests, properties, the conformance kit, trace replays and a
# 100-seed sweep of every scenario.
# With CI=true (as .ci/run sets it) it builds hardened, fails on any compiler warning, sweeps
# seeds 1-100 of every scenario (ctest's sweep, run once outside ctest so that its probe reports
# are kept) and then runs the campaigns CI owns: the
# code-probe sweep (tools/probe_sweep.sh: fails on a probe no run reaches), a short fuzz smoke of
# every libFuzzer target (fuzz/run_smoke.sh, clang build), the blind hunt against SGLang's own
# cache (ctest -L sglang), the mutation runner (tests/mutants/run_mutants.sh) and a small blind
# mutation-score sample (tools/mutation_score.sh). Each stage prints its start in seconds.
# Usage: tools/test.sh [preset]   (default | debug | asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
tools/setup.sh
# CI builds hardened (libstdc++ assertions: an out-of-range index aborts instead of reading
# garbage) and fails on any compiler warning. The warnings are found in the build's output, not
# by -Werror, so that the compile commands are the mutation runner's (tests/mutants/
# run_mutants.sh builds the same files hardened, without -Werror: a mutant may warn) and its
# build is served from this one's compiler cache.
configure_args=(-DKVSIM_WERROR=OFF)
ctest_args=(--preset "$preset")
if [ "${CI:-}" = "true" ]; then
  # Unity batches above the core (cmake/KvsimUnity.cmake): CI builds everything once, and the
  # mutation runner, the score sample and the fuzz smoke configure the same way (KVSIM_UNITY).
  export KVSIM_UNITY=ON
  configure_args+=(-DKVSIM_HARDENED=ON -DKVSIM_UNITY=ON)
  # Seeds 1-100 of every scenario (the sweep label) run in the CI sweep below, once, with their
  # probe reports kept for the probe sweep. The preset's filter is spelled out
  # here: CTest 3.25 mishandles a -LE given beside --preset (it ran every test, or none less).
  if [ "$preset" = "default" ]; then
    ctest_args=(--test-dir build/default --output-on-failure -LE '^(sweep|long)$')
  fi
fi
# ccache (tools/setup.sh installs it) makes a rebuild of unchanged sources cheap, also in a fresh
# clone at the same path; every CI build below uses it. Paths below the checkout are hashed
# relative to the build folder, and (with -g1 debug info) the folder itself is not hashed, so a
# copy of the tree at the same depth (the mutation runner's) hits the same entries.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
fi
cmake --preset "$preset" "${configure_args[@]}" "${launcher[@]}" >/dev/null
if [ "${KVSIM_UNITY:-OFF}" = "ON" ]; then  # before the build: a clash fails in seconds
  python3 tools/check_unity_names.py "build/$preset"
fi
mkdir -p build
build_log="build/build-$preset.log"
cmake --build --preset "$preset" -j"$(nproc)" 2>&1 | tee "$build_log"
if [ "${CI:-}" = "true" ] && grep -E '(^|[ :])(warning|Warning):' "$build_log" >/dev/null; then
  echo "CI: the build printed compiler warnings (CI treats them as errors):" >&2
  grep -E -B2 -A6 '(^|[ :])(warning|Warning):' "$build_log" >&2
  exit 1
fi
# The file store makes and removes a file per page; on a disk that discards on unlink that is
# most of a file-store run's time (a shrink of a file_storage_budget trace: 22 s of system
# time in /tmp, 2.6 s in /dev/shm). The campaigns below keep their temporary stores on a
# tmpfs when one with room is there: the same code and files, without the disk's wait. CI's
# ctest does too (session 29, interleaved: system time 40-48 s on disk, 33 s on tmpfs).
if [ "${CI:-}" = "true" ] && [ -z "${KVSIM_CI_KEEP_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
  [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((2 * 1024 * 1024)) ]; then
  TMPDIR=$(mktemp -d /dev/shm/kvsim-ci-XXXXXX)
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
fi
ctest "${ctest_args[@]}" -j"$(nproc)"
echo "== build and ctest took ${SECONDS} s"

if [ "${CI:-}" = "true" ] && [ "$preset" = "default" ]; then
  # Seeds 1-${KVSIM_CI_SEEDS:-100} of every scenario (the seeds of ctest's sweep label; CI swept
  # 1-300 until session 29, 160 s of a run whose line is 900 s; the probe sweep's and the
  # mutation runner's hunts below draw configurations these eight scenarios never make), one
  # scenario at a time over every core (--jobs); mooncake_synthetic (9 s a seed) runs one seed,
  # as in ctest. A failing seed leaves its op trace in build/ci-sweep/; each scenario's JSON
  # Lines (a line per seed, then the sweep with its probe report) stay there for the probe sweep.
  seeds="${KVSIM_CI_SEEDS:-100}"
  echo "== [${SECONDS} s] simulator sweep: seeds 1-$seeds of every scenario"
  rm -rf build/ci-sweep && mkdir -p build/ci-sweep
  ci_sweep_one() {  # ci_sweep_one SCENARIO: exit status of the sweep; one summary line
    local name n=$seeds rc=0
    name=$(basename "$1" .json)
    if [ "$name" = mooncake_synthetic ]; then n=1; fi
    build/default/tools/kvsim run "$1" --seed 1 --seeds "$n" --jobs "$(nproc)" --no-progress \
      --json --trace-dir build/ci-sweep >"build/ci-sweep/$name.jsonl" || rc=$?
    jq -rs --arg n "$name" '(map(select(.sweep)) | first | .sweep) as $s |
      (if $s then "\($n): \($s.seeds_tried) seeds from \($s.first_seed): \($s.failures) failing"
       else "\($n) seed \(.[0].seed): \(.[0].verdict)" end),
      (map(select(.ok == false)) | .[:5][] |
        "  seed \(.seed): \(.violation.invariant // .verdict): \(.violation.detail // "")\n    \(.trace // "")")' \
      "build/ci-sweep/$name.jsonl" 2>/dev/null || echo "$name: no sweep summary (exit $rc)"
    return "$rc"
  }
  export -f ci_sweep_one
  export seeds
  printf '%s\n' scenarios/*.json | xargs -P 1 -I{} bash -c 'ci_sweep_one "$0"' {}
  echo "== [${SECONDS} s] code probes: every probe reached (tools/probe_sweep.sh on the CI sweep's reports)"
  # 300 hunt units reach every probe the scenarios do not, the rarest 22 times (600 until
  # session 29: 20 s more for the same 70 probes).
  KVSIM_PROBE_HUNT_UNITS="${KVSIM_PROBE_HUNT_UNITS:-300}" KVSIM_PROBE_REPORTS=build/ci-sweep \
    tools/probe_sweep.sh build/default/tools/kvsim
  # Three stages side by side: the fuzz smoke (a clang build on every core, then its targets),
  # the SGLang hunt (one Python driver: one core) and the mutation runner (a mutant's one
  # changed file compiled at a time, then a hunt on one core). One after another, each left a
  # core idle most of its time (docs/benchmarks.md, "CI time, session 29"). The two in the
  # background print their output when they end; the score sample follows the runner; any of
  # the four fails the run.
  fuzz_log=build/ci-fuzz.log
  sglang_log=build/ci-sglang.log
  echo "== [${SECONDS} s] fuzz smoke (fuzz/run_smoke.sh ${KVSIM_FUZZ_SECONDS:-10}), beside the SGLang hunt and the mutation runner"
  ( rc=0
    fuzz/run_smoke.sh "${KVSIM_FUZZ_SECONDS:-10}" >"$fuzz_log" 2>&1 || rc=$?
    echo "== [${SECONDS} s] the fuzz smoke ended (exit $rc)" >>"$fuzz_log"
    exit "$rc" ) &
  fuzz_pid=$!
  echo "== [${SECONDS} s] the blind hunts against SGLang's own cache (ctest -L sglang: seeds 000-003 at their buggy commits, seed 004 at its parent and fix)"
  ( rc=0
    ctest --test-dir "build/$preset" -L sglang --output-on-failure >"$sglang_log" 2>&1 || rc=$?
    echo "== [${SECONDS} s] the SGLang hunt ended (exit $rc)" >>"$sglang_log"
    exit "$rc" ) &
  sglang_pid=$!
  echo "== [${SECONDS} s] mutation runner (tests/mutants/run_mutants.sh --budget ${KVSIM_MUTANT_BUDGET:-60})"
  runner_rc=0
  tests/mutants/run_mutants.sh --budget "${KVSIM_MUTANT_BUDGET:-60}" || runner_rc=$?
  echo "== [${SECONDS} s] the mutation runner ended (exit $runner_rc)"
  # A small blind mutation-score sample (docs/mutation-score.md): fails if the tool breaks (apply,
  # build a private copy, hunt, classify, merge), not on the score of 2 mutants. One shard: the
  # copy's build is the stage's cost, and a second shard doubled it for no more coverage of the
  # tool (tools.mutation_score_* in ctest cover the shard and merge arithmetic). It reuses the
  # runner's copy, so it starts when the runner ends, beside the fuzz smoke's tail.
  echo "== [${SECONDS} s] mutation score sample (tools/mutation_score.sh --sample ${KVSIM_MUTATION_SAMPLE:-2} --budget ${KVSIM_MUTATION_BUDGET:-15})"
  score_rc=0
  KVSIM_MUTATION_WORK=build/mutants tools/mutation_score.sh --sample "${KVSIM_MUTATION_SAMPLE:-2}" \
    --seed "${KVSIM_MUTATION_SEED:-1}" --budget "${KVSIM_MUTATION_BUDGET:-15}" \
    --results build/mutation-score.tsv >build/mutation-score.log 2>&1 || score_rc=$?
  echo "== [${SECONDS} s] the mutation score sample ended (exit $score_rc)"
  sglang_rc=0
  wait "$sglang_pid" || sglang_rc=$?
  sed 's/^/  [sglang] /' "$sglang_log"
  fuzz_rc=0
  wait "$fuzz_pid" || fuzz_rc=$?
  sed 's/^/  [fuzz] /' "$fuzz_log" | grep -v '^  \[fuzz\] \[[0-9]*/[0-9]*\] '
  sed "s/^/  [score] /" build/mutation-score.log
  if [ "$score_rc" -eq 0 ]; then tools/mutation_score.sh --merge build/mutation-score.tsv; fi
  if [ "$runner_rc" -ne 0 ] || [ "$sglang_rc" -ne 0 ] || [ "$fuzz_rc" -ne 0 ] ||
    [ "$score_rc" -ne 0 ]; then
    echo "CI: the mutation runner exited $runner_rc, the SGLang hunt (ctest -L sglang) $sglang_rc, the fuzz smoke $fuzz_rc, the mutation score sample $score_rc" >&2
    exit 1
  fi
  echo "== CI campaigns done at ${SECONDS} s"
fi
