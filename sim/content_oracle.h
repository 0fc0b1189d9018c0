// The content oracle (DESIGN.md invariant 6): the bytes a model forward writes for one token
// in one layer are a pure function of (namespace, token prefix, position, layer). Whatever
// the cache did since — split, evict, back up, load back, prefetch — a read of that slot must
// return exactly these bytes.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/common/types.h"

namespace kvsim::sim {

std::vector<std::byte> expected_item(Namespace ns, std::span<const Token> tokens, size_t position,
                                     int32_t layer, size_t item_bytes);

// The SWA pool's item for one token: a different function of the same inputs, so a slot
// of the wrong pool never passes for the right one.
std::vector<std::byte> expected_swa_item(Namespace ns, std::span<const Token> tokens,
                                         size_t position, int32_t layer, size_t item_bytes);

// A Mamba layer's recurrent state after tokens[0, end): a function of the whole prefix.
std::vector<std::byte> expected_mamba_state(Namespace ns, std::span<const Token> tokens, size_t end,
                                            int32_t layer, size_t state_bytes);

}  // namespace kvsim::sim
