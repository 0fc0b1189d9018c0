#!/usr/bin/env bash
# tools/coverage.sh --hunt SECONDS: coverage of core/ by a blind hunt alone (no unit test).
# Called by tools/coverage.sh with the hunt's seconds, llvm-profdata, llvm-cov and an optional
# HTML folder; see its header. Build jobs: KVSIM_JOBS (default 2, the shared box's limit).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=$1 profdata=$2 cov=$3 html=${4:-}

export CCACHE_DIR=${CCACHE_DIR:-/work/ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake --preset coverage "${launcher[@]}" >/dev/null
build=build/coverage
cmake --build "$build" --target kvsim -j"${KVSIM_JOBS:-2}"
kvsim=$build/tools/kvsim

out="$build/hunt"
rm -rf "$out"
mkdir -p "$out/profiles" "$out/traces"
# %p: one file per process; %m: merge mode, which the worker's per-unit writes need (without
# it each write would replace the last).
set +e
LLVM_PROFILE_FILE="$PWD/$out/profiles/%p-%m.profraw" \
  "$kvsim" hunt --time-budget "$seconds" --jobs 1 --trace-dir "$out/traces" | tee "$out/hunt.txt"
rc=${PIPESTATUS[0]}
set -e
case $rc in
  0) ;;
  1) echo "coverage.sh: the hunt found a violation (above); its coverage is still reported" ;;
  *) echo "coverage.sh: kvsim hunt exited $rc (not a hunt result); no coverage" >&2; exit 1 ;;
esac

raws=("$out"/profiles/*.profraw)
[ -e "${raws[0]}" ] || { echo "coverage.sh: the hunt wrote no profile" >&2; exit 1; }
echo "coverage.sh: ${#raws[@]} raw profile(s) (one per process that wrote one)"
"$profdata" merge -sparse "${raws[@]}" -o "$out/hunt.profdata"

# Every source and header of core/ but the CUDA backend, which the coverage preset does not
# compile (KVSIM_CUDA=OFF); tools/coverage_summary.py names the files kvsim has no code of.
mapfile -t core_files < <(find "$PWD/core" \( -name '*.cpp' -o -name '*.h' \) ! -path '*/cuda/*' | sort)
"$cov" export -summary-only "$kvsim" -instr-profile="$out/hunt.profdata" > "$out/summary.json"
echo
echo "coverage of core/ by the hunt alone (kvsim hunt --time-budget $seconds --jobs 1):"
/usr/bin/python3 tools/coverage_summary.py "$out/summary.json" "$PWD" "${core_files[@]}"
echo "not counted: core/backend/cuda/ (not compiled: the coverage preset sets KVSIM_CUDA=OFF)"
# llvm-cov's file arguments must match the binary's names, which are relative to the build
# folder when ccache's base dir rewrote the compile commands: map them back.
eq=(-path-equivalence="$PWD/$build/../..,$PWD")
"$cov" report -show-functions "$kvsim" -instr-profile="$out/hunt.profdata" "${eq[@]}" \
  "${core_files[@]}" > "$out/functions.txt"
"$cov" show "$kvsim" -instr-profile="$out/hunt.profdata" -show-branches=count "${eq[@]}" \
  "${core_files[@]}" > "$out/lines.txt"
echo "coverage.sh: per function in $out/functions.txt, line by line in $out/lines.txt"
# Which mutants of tools/mutation_score.sh's enumeration this hunt could kill at all: a mutant
# on code that never ran, or `if (false)` on a condition never true, survives any check
# (tools/mutate/reach.py; docs/mutation-score.md "Reach").
"$cov" export "$kvsim" -instr-profile="$out/hunt.profdata" "${eq[@]}" "${core_files[@]}" \
  > "$out/export.json"
mapfile -t mutated < <(sed -n '/^files="/,/"$/p' tools/mutation_score.sh | tr -d '"' |
  sed 's/^files=//' | tr ' ' '\n' | grep .)
echo
/usr/bin/python3 tools/mutate/reach.py "$out/export.json" "${mutated[@]}" --tsv "$out/reach.tsv" \
  --top 15
echo "coverage.sh: per mutant in $out/reach.tsv"
if [ -n "$html" ]; then
  "$cov" show "$kvsim" -instr-profile="$out/hunt.profdata" -format=html -show-branches=count \
    -output-dir="$html" "${eq[@]}" "${core_files[@]}"
  echo "coverage.sh: HTML report in $html/index.html"
fi
