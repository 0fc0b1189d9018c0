// Force-included into the ThreadSanitizer build only (python/tsan/run.sh): the ifunc resolvers of
// KVSIM_SIMD_CLONES functions run while the module is relocated, before TSan can intercept, and
// crash the interpreter at import (SEGV at an unrelocated address). The baseline build of each
// such function computes the same results (core/common/simd_clones.h).
#pragma once
#include "core/common/simd_clones.h"
#undef KVSIM_SIMD_CLONES
#define KVSIM_SIMD_CLONES
