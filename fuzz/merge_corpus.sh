#!/usr/bin/env bash
# Merges new inputs into a target's seed corpus and minimises it: libFuzzer's -merge=1 keeps the
# smallest set of inputs that covers every feature of fuzz/corpus/<target> plus the given
# folders (BoringSSL's minimise_corpora.sh). The result replaces fuzz/corpus/<target>.
#
# Usage: fuzz/merge_corpus.sh <target> [folder...]
#   e.g. fuzz/merge_corpus.sh core_ops_fuzzer build/fuzz/smoke/core_ops_fuzzer/corpus
#        fuzz/merge_corpus.sh trace_parser_fuzzer        (minimise only)
# Needs the fuzz preset built (cmake --preset fuzz && cmake --build --preset fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: $0 <target> [folder...]" >&2
  exit 2
fi
target=$1
shift
bin=build/fuzz/fuzz/$target
if [ ! -x "$bin" ]; then
  echo "$bin is missing: cmake --preset fuzz && cmake --build --preset fuzz" >&2
  exit 2
fi
corpus=fuzz/corpus/$target
mkdir -p "$corpus"
fresh=$(mktemp -d "${TMPDIR:-/tmp}/kvsim-merge.XXXXXX")
trap 'rm -rf "$fresh"' EXIT

before=$(find "$corpus" -type f | wc -l)
"$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 "$fresh" "$corpus" "$@" 2>&1 |
  grep -E '^MERGE-OUTER|ERROR' || true
after=$(find "$fresh" -type f | wc -l)
if [ "$after" -eq 0 ]; then
  echo "merge produced no inputs; $corpus left as it was" >&2
  exit 1
fi
# libFuzzer names merged files by their SHA-1; a hand-named seed that survives keeps its name.
while IFS= read -r f; do
  sha=$(sha1sum "$f" | cut -d' ' -f1)
  if [ -f "$fresh/$sha" ]; then mv "$fresh/$sha" "$fresh/$(basename "$f")"; fi
done < <(find "$corpus" -type f)
find "$corpus" -type f -delete
cp "$fresh"/* "$corpus"/
echo "$corpus: $before → $after inputs ($(du -sh "$corpus" | cut -f1))"
