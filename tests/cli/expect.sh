#!/usr/bin/env bash
# expect.sh RC REGEX -- COMMAND...: runs COMMAND, passes if it exits with RC and its combined
# stdout+stderr matches the extended regex REGEX.
set -u
want_rc=$1; regex=$2; shift 2; [ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
if [ "$rc" -ne "$want_rc" ]; then
  printf 'expected exit %s, got %s\n--- output ---\n%s\n' "$want_rc" "$rc" "$out"; exit 1
fi
if ! printf '%s' "$out" | grep -Eq -- "$regex"; then
  printf 'output does not match /%s/\n--- output ---\n%s\n' "$regex" "$out"; exit 1
fi
printf '%s\n' "$out" | head -5
