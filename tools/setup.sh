#!/usr/bin/env bash
# Installs every build and test dependency of kvsim from Debian packages.
# Idempotent: it calls apt only for packages that are missing, so a second run costs ~0.2 s.
# CUDA is not installed here: it is used when nvcc is present (see CMakeLists.txt).
# pkg-config, graphviz (dot) and chromium (headless) serve the install, tree-picture and report
# tests (docs/outputs.md); those tests skip cleanly where a tool is absent.
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang clang-format libclang-rt-14-dev llvm
  libgtest-dev libgmock-dev librapidcheck-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev
  time  # /usr/bin/time: peak memory in bench/scale_bench.sh
  python3 python3-pytest jq
  # The Python module and its tests (python/). python3-torch runs SGLang's own cache code under
  # the fake device (docs/sglang-hunt.md) and the binding's torch paths; tests that need it skip
  # cleanly only on a machine without it.
  pybind11-dev python3-dev python3-numpy python3-hypothesis python3-torch
  # SGLang's newest snapshot builds a small C++ page-hash extension (-lcrypto) the first time
  # the SGLang target loads it (docs/sglang-hunt.md).
  libssl-dev
  pkg-config graphviz chromium
  python3-jsonschema  # validates the scenarios against `kvsim schema` (tests/cli/scenario_reference.py)
  ccache  # CI's builds (tools/test.sh, fuzz smoke, mutation runner) reuse unchanged objects
  python3-venv python3-pip python3-setuptools python3-wheel  # `pip install ./python` (docs/sglang.md)
)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  "$(dirname "$0")/install_python.sh"  # `import kvsim` for this checkout's build (docs/sglang.md)
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
"$(dirname "$0")/install_python.sh"  # `import kvsim` for this checkout's build (docs/sglang.md)
