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
set -euo pipefail
cd "$(dirname "$0")/.."

html=""
while [ $# -gt 0 ]; do
  case "$1" in
    --html) html=$2; shift 2 ;;
    *) echo "coverage.sh: unknown argument '$1' (usage: tools/coverage.sh [--html DIR])" >&2; exit 2 ;;
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
# shellcheck disable=SC2086  # one argument per source file
"$cov" report "${objects[@]}" -instr-profile="$build/kvsim.profdata" $core_files
if [ -n "$html" ]; then
  # shellcheck disable=SC2086
  "$cov" show "${objects[@]}" -instr-profile="$build/kvsim.profdata" -format=html \
    -output-dir="$html" $core_files
  echo "coverage.sh: HTML report in $html/index.html"
fi
