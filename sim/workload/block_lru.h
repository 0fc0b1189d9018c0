// BlockLru: the plain block-granular LRU the Mooncake reference hit rates are computed with —
// every block of a request inserted at arrival in file order, a hit being the longest run of
// leading block ids already cached. It validates the importer and the trace against published
// figures; the real core (a radix tree evicting whole leaves) is compared against it in
// docs/mooncake.md.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/workload/mooncake.h"

namespace kvsim::sim {

struct BlockLruResult {
  double token_hit_rate = 0;  // sum(min(hits × block, input_length)) / sum(input_length)
  double block_hit_rate = 0;  // hit blocks / blocks
  int64_t input_tokens = 0;
  int64_t hit_tokens = 0;
};

// capacity_tokens <= 0: unlimited.
BlockLruResult block_lru_hit_rate(const std::vector<MooncakeRecord>& records,
                                  int64_t capacity_tokens, int64_t block_tokens);

}  // namespace kvsim::sim
