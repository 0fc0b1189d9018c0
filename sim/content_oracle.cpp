#include "sim/content_oracle.h"

namespace kvsim::sim {
namespace {

// Pools are told apart through the layer term: the SWA and Mamba pools use shifted layers.
constexpr int64_t kind_offset(ContentKind kind) {
  return static_cast<int64_t>(kind) << 20;
}

uint64_t hash_prefix(Namespace ns, std::span<const Token> tokens, size_t position) {
  PrefixHash h(ns);
  for (size_t i = 0; i <= position; ++i)
    h.add(tokens[i]);
  return h.value();
}

}  // namespace

void fill_item(uint64_t h, size_t position, int32_t layer, ContentKind kind,
               std::span<std::byte> out) {
  h ^= static_cast<uint64_t>(layer + kind_offset(kind)) * 0x9E3779B97F4A7C15ull + position;
  for (std::byte& b : out) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;  // an LCG stream per item
    b = static_cast<std::byte>(h >> 56);
  }
}

std::vector<std::byte> expected_item(Namespace ns, std::span<const Token> tokens, size_t position,
                                     int32_t layer, size_t item_bytes) {
  std::vector<std::byte> out(item_bytes);
  fill_item(hash_prefix(ns, tokens, position), position, layer, ContentKind::kFull, out);
  return out;
}

std::vector<std::byte> expected_swa_item(Namespace ns, std::span<const Token> tokens,
                                         size_t position, int32_t layer, size_t item_bytes) {
  std::vector<std::byte> out(item_bytes);
  fill_item(hash_prefix(ns, tokens, position), position, layer, ContentKind::kSwa, out);
  return out;
}

std::vector<std::byte> expected_mamba_state(Namespace ns, std::span<const Token> tokens, size_t end,
                                            int32_t layer, size_t state_bytes) {
  std::vector<std::byte> out(state_bytes, std::byte{0});
  if (end == 0) return out;
  fill_item(hash_prefix(ns, tokens, end - 1), end - 1, layer, ContentKind::kMamba, out);
  return out;
}

}  // namespace kvsim::sim
