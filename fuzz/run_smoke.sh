#!/usr/bin/env bash
# Smoke-fuzzes every target: installs the toolchain if missing (tools/setup.sh), configures the
# `fuzz` preset (clang, libFuzzer, ASan + UBSan) in build/fuzz and builds only the targets it
# runs (no Python module, no tests), then runs each target
# for N seconds on its seed corpus and dictionary. Fails on any crash, sanitizer report, timeout
# or out-of-memory; prints each target's exec/s (libFuzzer's final stats).
#
# Usage: fuzz/run_smoke.sh [seconds] [target...]   (default: 20 s, every fuzz/*_fuzzer.cpp)
# Env:   KVSIM_FUZZ_STRICT=1  also fail on the known findings (fuzz/findings/README.md)
#        SMOKE_JOBS=N         build parallelism (default: nproc)
#        SMOKE_PARALLEL=N     targets fuzzed at once (default: nproc)
# New inputs go to build/fuzz/smoke/<target>/corpus, never into fuzz/corpus (merge them with
# fuzz/merge_corpus.sh); a crash leaves crash-<sha1> and, for a simulator violation, the op trace
# kvsim-<target>-<sha1>.trace.jsonl in build/fuzz/smoke/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/*_fuzzer.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

tools/setup.sh
# Only the targets this smoke runs (the preset has no tests, tools or Python module); ccache,
# when installed, keeps a rebuild of unchanged sources cheap.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# KVSIM_UNITY=ON (tools/test.sh sets it in CI): the simulator in unity batches, half its CPU
# time, and the core too (KVSIM_UNITY_CORE: nothing rebuilds this preset's core file by file).
cmake --preset fuzz -DKVSIM_UNITY="${KVSIM_UNITY:-OFF}" -DKVSIM_UNITY_CORE="${KVSIM_UNITY:-OFF}" \
  "${launcher[@]}" >/dev/null
if [ "${KVSIM_UNITY:-OFF}" = "ON" ]; then  # its batches differ from the default preset's
  python3 tools/check_unity_names.py build/fuzz
fi
cmake --build --preset fuzz -j"${SMOKE_JOBS:-$(nproc)}" --target "${targets[@]}"

root=build/fuzz/smoke
rm -rf "$root"
failed=()
summary=()
# The targets run side by side, SMOKE_PARALLEL at a time (default: one per core; each libFuzzer
# process is single-threaded), each for the full N seconds: the same fuzzing in less wall time.
parallel="${SMOKE_PARALLEL:-$(nproc)}"
run_target() {  # run_target TARGET: fuzzes it, leaves its exit code in $root/TARGET/rc
  local t=$1 out=$root/$1 rc=0
  mkdir -p "$out/corpus"
  local args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
              -artifact_prefix="$out/")
  if [ -f "fuzz/$t.dict" ]; then args+=(-dict="fuzz/$t.dict"); fi
  local seeds=()
  if [ -d "fuzz/corpus/$t" ]; then seeds+=("fuzz/corpus/$t"); fi
  "build/fuzz/fuzz/$t" "${args[@]}" "$out/corpus" "${seeds[@]}" >"$out/log.txt" 2>&1 || rc=$?
  echo "$rc" >"$out/rc"
}
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
  echo "== $t: ${seconds}s"
  run_target "$t" &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  out=$root/$t
  rc=$(cat "$out/rc" 2>/dev/null || echo "?")
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/log.txt" | tail -1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log.txt" | tail -1)
  if [ "$rc" != 0 ]; then
    failed+=("$t")
    summary+=("$(printf '%-24s FAILED (exit %s) after %s runs' "$t" "$rc" "${runs:-?}")")
    echo "-- $t failed (exit $rc); the end of its log ($out/log.txt):"
    grep -v '^    #' "$out/log.txt" | tail -25
    ls "$out" | grep -E '^(crash|leak|timeout|oom|slow-unit)-|\.jsonl$' | sed "s|^|   $out/|" || true
  else
    summary+=("$(printf '%-24s ok  %8s exec/s  %10s runs' "$t" "${execs:-?}" "${runs:-?}")")
  fi
done

echo
echo "fuzz smoke (${seconds}s per target, $parallel at a time, $(nproc) cores on this machine):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
