// KVSIM_SIMD_CLONES: a function built several times, for AVX-512 (GCC) and AVX2 next to the
// baseline x86-64, the best one the CPU runs picked at load time (an ifunc). For the per-token
// loops that run over every token of a prompt (wide ids, page hashes, slot expansion and checks).
// Every clone computes the same results: use it only on integer code, where vectorising cannot
// change a value. Whatever such a function calls must be inlined into it (an outlined helper is
// built once, for the baseline).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVSIM_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#elif defined(__x86_64__) && defined(__clang__)
#define KVSIM_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KVSIM_SIMD_CLONES
#endif

#if defined(__GNUC__)
#define KVSIM_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KVSIM_ALWAYS_INLINE inline
#endif
