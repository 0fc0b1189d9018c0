#!/usr/bin/env bash
# Installs kvsim from a build directory into a fresh prefix, checks what was installed (CMake
# package, pkg-config file, headers, libraries, the kvsim binary), then configures, builds and
# runs examples/external-component against that prefix only — the conformance kit run on a
# component from "another repository".
# Usage: external_component.sh <kvsim build dir> <source dir> <work dir>
set -euo pipefail
build="$1"; src="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in bin/kvsim lib/cmake/kvsim/kvsimConfig.cmake lib/cmake/kvsim/kvsimTargets.cmake \
         lib/pkgconfig/kvsim.pc lib/libkvsim_sim.a lib/libkvsim_conformance.a \
         include/kvsim/core/cache/hi_cache.h include/kvsim/sim/model/executor.h \
         include/kvsim/conformance/conformance.h share/kvsim/import_sglang.py; do
  [ -e "$prefix/$f" ] || { echo "external_component: $f was not installed"; exit 1; }
done
# (captured first: grep -q closing the pipe early would kill kvsim with SIGPIPE under pipefail)
"$prefix/bin/kvsim" run --seed 3 >"$work/run.log"
grep -q "seed 3: ok" "$work/run.log" || { echo "external_component: installed kvsim run failed"; cat "$work/run.log"; exit 1; }
# pkg-config: a program against the core and the simulator, compiled from the flags alone.
if command -v pkg-config >/dev/null; then
  cat >"$work/pc.cpp" <<'CPP'
#include "sim/campaign/runner.h"
#include "sim/config/scenario.h"
int main() {
  const kvsim::sim::Scenario s = kvsim::sim::default_scenario();
  kvsim::sim::RunRequest r{.scenario = &s, .seed = 1};
  return kvsim::sim::run_scenario(r).ok() ? 0 : 1;
}
CPP
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig" flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kvsim)
  ${CXX:-c++} -O1 "$work/pc.cpp" -o "$work/pc" $flags
  "$work/pc"
  echo "external_component: pkg-config build ran a scenario"
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
gen=()
if command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S "$src/examples/external-component" -B "$work/build" "${gen[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/build" -j2
ctest --test-dir "$work/build" --output-on-failure
