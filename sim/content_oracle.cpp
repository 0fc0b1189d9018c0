#include "sim/content_oracle.h"

namespace kvsim::sim {

std::vector<std::byte> expected_item(Namespace ns, std::span<const Token> tokens, size_t position,
                                     int32_t layer, size_t item_bytes) {
  uint64_t h = 1469598103934665603ull ^ ns;  // FNV-1a over the prefix
  for (size_t i = 0; i <= position; ++i) {
    h = (h ^ static_cast<uint32_t>(tokens[i])) * 1099511628211ull;
  }
  h ^= static_cast<uint64_t>(layer) * 0x9E3779B97F4A7C15ull + position;
  std::vector<std::byte> out(item_bytes);
  for (size_t i = 0; i < item_bytes; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;  // an LCG stream per item
    out[i] = static_cast<std::byte>(h >> 56);
  }
  return out;
}

std::vector<std::byte> expected_swa_item(Namespace ns, std::span<const Token> tokens,
                                         size_t position, int32_t layer, size_t item_bytes) {
  return expected_item(ns, tokens, position, layer + (1 << 20), item_bytes);
}

std::vector<std::byte> expected_mamba_state(Namespace ns, std::span<const Token> tokens, size_t end,
                                            int32_t layer, size_t state_bytes) {
  if (end == 0) return std::vector<std::byte>(state_bytes, std::byte{0});
  return expected_item(ns, tokens, end - 1, layer + (2 << 20), state_bytes);
}

}  // namespace kvsim::sim
