#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script for kvsim (UNTESTED here: no Docker; see fuzz/README.md).
# The environment gives CC, CXX, CFLAGS, CXXFLAGS (sanitizer + coverage flags), LIB_FUZZING_ENGINE
# and OUT. fuzz/CMakeLists.txt's "external" engine takes the flags as given and links each target
# with $LIB_FUZZING_ENGINE; then every target, its seed corpus and its dictionary go to $OUT.
cmake -S "$SRC/kvsim" -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DKVSIM_FUZZ=ON -DKVSIM_FUZZ_ENGINE=external -DKVSIM_FUZZ_LINK_FLAGS="$LIB_FUZZING_ENGINE" \
  -DKVSIM_TESTS=OFF -DKVSIM_BENCH=OFF -DKVSIM_TOOLS=OFF -DKVSIM_CUDA=OFF -DKVSIM_SANITIZE=OFF \
  -DKVSIM_PYTHON=OFF
# Only the fuzz targets (the libraries they link come with them).
targets=()
for src in "$SRC"/kvsim/fuzz/*_fuzzer.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build build -j"$(nproc)" --target "${targets[@]}"

for src in "$SRC"/kvsim/fuzz/*_fuzzer.cpp; do
  name=$(basename "$src" .cpp)
  cp "build/fuzz/$name" "$OUT/"
  if [ -d "$SRC/kvsim/fuzz/corpus/$name" ]; then
    (cd "$SRC/kvsim/fuzz/corpus/$name" && zip -q -r "$OUT/${name}_seed_corpus.zip" .)
  fi
  if [ -f "$SRC/kvsim/fuzz/$name.dict" ]; then
    cp "$SRC/kvsim/fuzz/$name.dict" "$OUT/"
  fi
done
