#include "core/tiers/page_hash.h"

#include <array>

#include "core/common/assert.h"
#include "core/tiers/sha256.h"

namespace kvsim {

PageDigest namespace_seed(Namespace ns) {
  std::array<uint8_t, 16> bytes{'k', 'v', 's', 'i', 'm', '-', 'n', 's'};
  for (int i = 0; i < 8; ++i)
    bytes[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(ns >> (8 * i));
  return Sha256::hash(bytes);
}

PageDigest hash_page(const PageDigest& prev, std::span<const Token> page_tokens) {
  KV_ASSERT(!page_tokens.empty(), "hash_page needs a non-empty page");
  Sha256 h;
  h.update(prev);
  // Encode in chunks so a page costs a few update() calls, not one per token.
  std::array<uint8_t, 256> chunk{};
  size_t n = 0;
  for (Token t : page_tokens) {
    const auto u = static_cast<uint32_t>(t);
    chunk[n++] = static_cast<uint8_t>(u);
    chunk[n++] = static_cast<uint8_t>(u >> 8);
    chunk[n++] = static_cast<uint8_t>(u >> 16);
    chunk[n++] = static_cast<uint8_t>(u >> 24);
    if (n == chunk.size()) {
      h.update(std::span<const uint8_t>(chunk.data(), n));
      n = 0;
    }
  }
  h.update(std::span<const uint8_t>(chunk.data(), n));
  return h.finish();
}

std::vector<PageDigest> hash_pages(const PageDigest& prev, std::span<const Token> tokens,
                                   int32_t page_size) {
  KV_ASSERT(page_size > 0 && tokens.size() % static_cast<size_t>(page_size) == 0,
            "hash_pages needs whole pages");
  std::vector<PageDigest> out;
  out.reserve(tokens.size() / static_cast<size_t>(page_size));
  PageDigest last = prev;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(page_size)) {
    last = hash_page(last, tokens.subspan(i, static_cast<size_t>(page_size)));
    out.push_back(last);
  }
  // [hash.result] one digest per page, the last one the chain's end.
  KV_ASSERT(out.size() * static_cast<size_t>(page_size) == tokens.size() &&
                (out.empty() ? last == prev : out.back() == last),
            "hash.result: " + std::to_string(out.size()) + " digest(s) for " +
                std::to_string(tokens.size()) + " token(s) in pages of " +
                std::to_string(page_size));
  return out;
}

std::string to_hex(const PageDigest& digest) {
  return to_hex(std::span<const uint8_t>(digest));
}

}  // namespace kvsim
