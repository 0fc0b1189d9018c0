#!/usr/bin/env bash
# Makes `import kvsim` (and `kvsim.sglang`) work for this checkout's build, without root: writes
# kvsim.pth into the user site directory of each Python 3 on the machine (Debian's
# /usr/bin/python3 and the `python3` on PATH if it is another), naming <build>/python, where
# the build puts the package and its dist-info (SGLang's plugin entry point). Python adds that
# folder to sys.path at start-up once it exists, so this may run before the first build.
# Honours PYTHONUSERBASE. tools/setup.sh calls it; the copying installs are
# `pip install --no-build-isolation --no-index ./python` and
# `cmake --install build/default --component python` (docs/sglang.md).
# A kvsim.pth that already names another folder (another checkout, another build) is left as
# it is, with a note: only --force re-points it, so no test script run from another checkout
# (tools/setup.sh, fuzz/run_smoke.sh, tools/test.sh) changes what `import kvsim` loads.
#   tools/install_python.sh [--force] [build dir, default build/default]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
build="${1:-$root/build/default}"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
target="$build/python"

done_sites=()
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -n "$py" ] && [ -x "$py" ] || continue
  site="$("$py" -c 'import site, sys; sys.stdout.write(site.getusersitepackages() if site.ENABLE_USER_SITE else "")' 2>/dev/null || true)"
  if [ -z "$site" ]; then
    echo "install_python: $py has user site-packages disabled; use PYTHONPATH=$target" >&2
    continue
  fi
  case " ${done_sites[*]-} " in *" $site "*) continue ;; esac
  done_sites+=("$site")
  if [ -f "$site/kvsim.pth" ] && [ "$force" -eq 0 ]; then
    current="$(head -n1 "$site/kvsim.pth")"
    if [ "$current" != "$target" ]; then
      echo "install_python: $site/kvsim.pth names $current; left as it is" \
           "(tools/install_python.sh --force points it at $target)"
    fi
    continue
  fi
  mkdir -p "$site"
  printf '%s\n' "$target" >"$site/kvsim.pth"
  echo "install_python: $site/kvsim.pth -> $target"
done
[ ${#done_sites[@]} -gt 0 ] || { echo "install_python: no python3 with a user site directory found" >&2; exit 1; }
