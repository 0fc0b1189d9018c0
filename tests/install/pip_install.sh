#!/usr/bin/env bash
# pip_install.sh: `pip install ./python` works as a user's environment needs it: into a fresh
# virtual environment (system site packages allowed: Debian's numpy, setuptools and wheel), no
# index, no build isolation. Then, from outside the checkout and with the user site (and so any
# kvsim.pth) off, `import kvsim, kvsim.sglang` loads the installed copy, numpy is a declared
# dependency, the SGLang plugin entry point is registered, and a tree matches what it stored.
# Prints the install's wall time. ctest python.pip_install (label pip; not in the default run:
# the first install compiles the core).
# Env: KVSIM_PIP_BUILD_DIR (default build/pip-test: reused, so a second run rebuilds nothing).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${KVSIM_PYTHON:-/usr/bin/python3}
for m in venv ensurepip pip setuptools wheel numpy; do  # one at a time: pip + setuptools in one
  "$py" -c "import $m" 2>/dev/null ||                  # process trip setuptools' distutils hack
    { echo "skipped: $py lacks $m (tools/setup.sh installs it)"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages "$tmp/env"
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
export KVSIM_PIP_BUILD_DIR="${KVSIM_PIP_BUILD_DIR:-$root/build/pip-test}"
start=$(date +%s.%N)
"$tmp/env/bin/pip" install -q --no-build-isolation --no-index "$root/python"
end=$(date +%s.%N)
cd "$tmp"
"$tmp/env/bin/python" - "$tmp/env" <<'PYEOF'
import importlib.metadata as md
import os
import sys

import kvsim
import kvsim.sglang  # noqa: F401

env = os.path.realpath(sys.argv[1])
where = os.path.realpath(kvsim.__file__)
assert where.startswith(env), "kvsim imported from %s, not the environment %s" % (where, env)
requires = md.requires("kvsim") or []
assert any(r.split()[0].startswith("numpy") for r in requires), requires
eps = [e for e in md.entry_points(group="sglang.srt.plugins") if e.name == "kvsim"]
assert eps and eps[0].value == "kvsim.sglang_plugin:register", eps
import numpy as np
t = kvsim.RadixTree()
t.insert([1, 2, 3], np.array([10, 20, 30], dtype=np.int64))
idx, _ = t.match_prefix([1, 2, 3, 4])
assert list(idx) == [10, 20, 30], list(idx)
print("installed", kvsim.__version__, "at", os.path.dirname(where), "requires", requires)
PYEOF
echo "pip install took $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s (build folder $KVSIM_PIP_BUILD_DIR)"
