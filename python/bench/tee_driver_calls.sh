#!/usr/bin/env bash
# KVSIM_PYTHON for recording SGLang-target driver sessions: kvsim starts the driver as
# "$KVSIM_PYTHON -m kvsim.sglang_target.driver ARGS"; this runs /usr/bin/python3 with the same
# arguments and copies each request line to $KVSIM_RECORD_CALLS_DIR/<pid>.jsonl, first line
# "# ARGS" (what python/bench/replay_driver_calls.py reads). Use with KVSIM_SGLANG_FORK=0 (a
# forked driver is not started through KVSIM_PYTHON):
#   KVSIM_SGLANG_FORK=0 KVSIM_PYTHON=python/bench/tee_driver_calls.sh KVSIM_RECORD_CALLS_DIR=/tmp/calls \
#     build/default/tools/kvsim hunt --target sglang --sglang-src bundle:sglang-6ed5780c4f --units 3 ...
set -euo pipefail
dir="${KVSIM_RECORD_CALLS_DIR:?set KVSIM_RECORD_CALLS_DIR to the folder for the recordings}"
mkdir -p "$dir"
f="$dir/$$.jsonl"
echo "# $*" >"$f"
tee -a "$f" | /usr/bin/python3 "$@"
