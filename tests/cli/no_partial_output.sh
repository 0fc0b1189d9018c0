#!/usr/bin/env bash
# no_partial_output.sh OUT COMMAND...: runs COMMAND, passes its output and exit code through,
# but exits 99 if it failed and left the file OUT behind (a partial output).
out=$1; shift
rm -f "$out"
"$@"; rc=$?
if [ "$rc" -ne 0 ] && [ -e "$out" ]; then echo "partial output left at $out"; exit 99; fi
exit "$rc"
