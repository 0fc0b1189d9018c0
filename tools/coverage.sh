#!/usr/bin/env bash
# Line coverage of core/ reached by the test suite plus the fuzz seed corpora.
#
# Builds the `coverage` preset (clang, -fprofile-instr-generate -fcoverage-mapping; the fuzz
# targets in standalone mode, so each corpus runs once as the ctest fuzz.<name>.corpus), runs
# every default test with one raw profile per process, merges them and prints llvm-cov's report
# for the files under core/ (the CUDA backend is not compiled there and is not counted).
# llvm-cov warns of "functions with mismatched data": inline and template code instantiated
# differently in several binaries; their counts from some binaries are dropped, so the figure
# errs low.
#
# Usage: tools/coverage.sh [--html DIR]   (--html also writes llvm-cov's HTML report to DIR)
#
# Hunt mode: tools/coverage.sh --hunt SECONDS [--html DIR]
# Coverage of core/ by a blind hunt alone (`kvsim hunt --time-budget SECONDS --jobs 1`, no unit
# test): builds only the coverage preset's kvsim (-j2, ccache), runs the hunt with one raw
# profile per process (the hunt forks a worker that writes its counts after every unit:
# sim/campaign/profile_flush.h), merges them and prints line, region and branch coverage of
# core/ per file, the total, and the core/ files that have no code in kvsim at all (never
# silently dropped). The unit the time budget cuts off mid-run is not counted (the hunt kills
# its worker, and does not count that unit either). docs/benchmarks.md "Hunt coverage".
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: tools/coverage.sh [--html DIR] | tools/coverage.sh --hunt SECONDS [--html DIR]"
html=""
hunt=""
while [ $# -gt 0 ]; do
  case "$1" in
    --html) [ $# -ge 2 ] || { echo "coverage.sh: --html needs a folder ($usage)" >&2; exit 2; }
            html=$2; shift 2 ;;
    --hunt) [ $# -ge 2 ] || { echo "coverage.sh: --hunt needs seconds ($usage)" >&2; exit 2; }
            hunt=$2; shift 2
            if ! [[ "$hunt" =~ ^[0-9]+([.][0-9]+)?$ ]] || [ "$hunt" = 0 ]; then
              echo "coverage.sh: --hunt: '$hunt' is not a positive number of seconds" >&2; exit 2
            fi ;;
    *) echo "coverage.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
done

# clang's tools carry the version in their name on Debian (llvm-cov-14); take the unversioned
# one where it exists.
tool() {
  local name=$1 found
  found=$(command -v "$name" || ls /usr/bin/"$name"-[0-9]* 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$found" ]; then echo "coverage.sh: $name not found (tools/setup.sh installs it)" >&2; exit 2; fi
  echo "$found"
}
profdata=$(tool llvm-profdata)
cov=$(tool llvm-cov)

if [ -n "$hunt" ]; then
  exec tools/coverage_hunt.sh "$hunt" "$profdata" "$cov" "$html"
fi

tools/setup.sh
cmake --preset coverage >/dev/null
cmake --build --preset coverage -j"$(nproc)"

build=build/coverage
profiles="$build/profiles"
rm -rf "$profiles"
mkdir -p "$profiles"
# %p: one file per process (tests run kvsim and the fuzz targets as child processes); %m: per
# binary signature, so two binaries never merge into one raw file.
LLVM_PROFILE_FILE="$PWD/$profiles/%p-%m.profraw" ctest --preset coverage -j"$(nproc)"

"$profdata" merge -sparse "$profiles"/*.profraw -o "$build/kvsim.profdata"

# Every instrumented executable that ran: test binaries, kvsim and the fuzz targets. llvm-cov
# takes the first one as its positional argument and the rest with -object.
objects=()
while IFS= read -r exe; do
  if [ ${#objects[@]} -eq 0 ]; then objects+=("$exe"); else objects+=(-object "$exe"); fi
done < <(find "$build" -type f -perm -u+x \( -path '*/tests/*' -o -path '*/tools/*' -o -path '*/fuzz/*' \) \
           ! -name '*.sh' ! -name '*.so' ! -path '*/CMakeFiles/*' | sort)

# Sources and headers (inline code counts too).
core_files=$(find "$PWD/core" \( -name '*.cpp' -o -name '*.h' \) ! -path '*/cuda/*' | sort)
# The binaries name their sources relative to the build folder when ccache's base dir rewrote
# the compile commands (--hunt builds with ccache): map those names back to the checkout's.
eq=-path-equivalence="$PWD/$build/../..,$PWD"
# shellcheck disable=SC2086  # one argument per source file
"$cov" report "${objects[@]}" -instr-profile="$build/kvsim.profdata" "$eq" $core_files
if [ -n "$html" ]; then
  # shellcheck disable=SC2086
  "$cov" show "${objects[@]}" -instr-profile="$build/kvsim.profdata" -format=html "$eq" \
    -output-dir="$html" $core_files
  echo "coverage.sh: HTML report in $html/index.html"
fi
