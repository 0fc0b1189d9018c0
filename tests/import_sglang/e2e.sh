#!/usr/bin/env bash
# e2e.sh KVSIM WORKDIR: a synthetic SGLang crash dump -> kvsim import-sglang -> kvsim run: the
# imported workload runs clean on the dump's configuration and the fidelity table agrees with
# SGLang's reported cached_tokens on every request but the one reported as 0.
set -euo pipefail
kvsim=$1; work=$2
here=$(cd "$(dirname "$0")" && pwd)
py=${KVSIM_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ]; then echo "skipped: $py not found"; exit 77; fi
mkdir -p "$work"; rm -f "$work"/*
PYTHONDONTWRITEBYTECODE=1 "$py" "$here/make_dump.py" "$work/crash_dump.pkl" e2e
"$kvsim" import-sglang "$work/crash_dump.pkl" -o "$work/w.jsonl" 2> "$work/import.err"
grep -q '14 requests imported from 1 dump(s) (12 finished, 2 unfinished, 0 aborted)' \
  <("$kvsim" import-sglang "$work/crash_dump.pkl" -o "$work/w.jsonl" 2>&1)
out=$("$kvsim" run --workload "$work/w.jsonl")
printf '%s\n' "$out"
check() { printf '%s\n' "$out" | grep -Eq -- "$1" || { echo "missing: $1"; exit 1; }; }
check 'sglang-dump seed 1: ok'
check 'requests finished 12, aborted 2'
check 'fidelity vs SGLang cached_tokens: 11 of 12 requests agree exactly'
check 'hit tokens: kvsim 704, SGLang 640 \(\+64\)'
check 'largest difference: \+64 tokens \(rid 8\)'
check 'rid 8 \(req-07\): kvsim 64, SGLang 0 \(\+64\)'
check 'by tier \(10 requests with a split\): device kvsim 640 / SGLang 640'
# the same through replay, and in JSON
"$kvsim" replay "$work/w.jsonl" --json | grep -q '"fidelity":{.*"exact":11'
echo "e2e ok"
