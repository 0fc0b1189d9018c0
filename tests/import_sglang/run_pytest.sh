#!/usr/bin/env bash
# Runs the import-sglang pytest suite with Debian's python3; exits 77 (ctest: skipped) when
# python3 or python3-pytest is missing.
py=${KVSIM_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ]; then echo "skipped: $py not found"; exit 77; fi
if ! "$py" -c 'import pytest' 2>/dev/null; then
  echo "skipped: pytest missing (apt-get install python3-pytest)"; exit 77
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider "$(dirname "$0")"
