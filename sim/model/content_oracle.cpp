#include "sim/model/content_oracle.h"

#include <array>
#include <bit>
#include <cstring>

#include "core/common/simd_clones.h"

// The per-item loops are built as KVSIM_SIMD_CLONES: eight 64-bit multiplies per item
// vectorise with AVX-512DQ. Same results in every clone.

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

constexpr uint64_t kLcgMul = 6364136223846793005ull;
constexpr uint64_t kLcgAdd = 1442695040888963407ull;

// The LCG k + 1 steps ahead: state_{k+1} = mul[k] * state_0 + add[k]. Eight bytes are then
// eight independent multiply-adds instead of a chain of eight dependent ones.
struct LcgJump {
  std::array<uint64_t, 8> mul{};
  std::array<uint64_t, 8> add{};
};

constexpr LcgJump make_jump() {
  LcgJump j;
  uint64_t m = 1;
  uint64_t a = 0;
  for (size_t k = 0; k < 8; ++k) {
    m *= kLcgMul;
    a = a * kLcgMul + kLcgAdd;
    j.mul[k] = m;
    j.add[k] = a;
  }
  return j;
}

constexpr LcgJump kJump = make_jump();

}  // namespace

void fill_item_reference(uint64_t h, size_t position, int32_t layer, ContentKind kind,
                         std::span<std::byte> out) {
  h ^= static_cast<uint64_t>(layer + kind_offset(kind)) * 0x9E3779B97F4A7C15ull + position;
  for (std::byte& b : out) {
    h = h * kLcgMul + kLcgAdd;  // an LCG stream per item
    b = static_cast<std::byte>(h >> 56);
  }
}

void fill_item(uint64_t h, size_t position, int32_t layer, ContentKind kind,
               std::span<std::byte> out) {
  h ^= static_cast<uint64_t>(layer + kind_offset(kind)) * 0x9E3779B97F4A7C15ull + position;
  std::byte* p = out.data();
  size_t n = out.size();
  for (; n >= 8; n -= 8, p += 8) {
    for (size_t k = 0; k < 8; ++k)
      p[k] = static_cast<std::byte>((kJump.mul[k] * h + kJump.add[k]) >> 56);
    h = kJump.mul[7] * h + kJump.add[7];
  }
  for (size_t k = 0; k < n; ++k) {
    h = h * kLcgMul + kLcgAdd;
    p[k] = static_cast<std::byte>(h >> 56);
  }
}

namespace {

inline uint64_t item_state(uint64_t h, size_t position, int32_t layer, ContentKind kind) {
  return h ^ (static_cast<uint64_t>(layer + kind_offset(kind)) * 0x9E3779B97F4A7C15ull + position);
}

// fill_item's eight bytes as one word in memory order (byte k at address k).
constexpr unsigned byte_shift(size_t k) {
  return std::endian::native == std::endian::little ? static_cast<unsigned>(8 * k)
                                                    : static_cast<unsigned>(56 - 8 * k);
}

inline uint64_t item_word(uint64_t h) {
  uint64_t w = 0;
  for (size_t k = 0; k < 8; ++k)
    w |= ((kJump.mul[k] * h + kJump.add[k]) >> 56) << byte_shift(k);
  return w;
}

inline uint64_t load_word(const std::byte* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

inline void store_word(std::byte* p, uint64_t w) {
  std::memcpy(p, &w, sizeof w);
}

}  // namespace

KVSIM_SIMD_CLONES void fill_items(std::span<const uint64_t> prefix_hash, size_t first, size_t count,
                                  int32_t layer, ContentKind kind, size_t item_bytes,
                                  std::byte* out) {
  if (item_bytes == 8) {
    for (size_t i = 0; i < count; ++i) {
      const size_t pos = first + i;
      store_word(out + i * 8, item_word(item_state(prefix_hash[pos], pos, layer, kind)));
    }
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    fill_item(prefix_hash[first + i], first + i, layer, kind,
              std::span<std::byte>(out + i * item_bytes, item_bytes));
  }
}

KVSIM_SIMD_CLONES size_t first_wrong_item(std::span<const uint64_t> prefix_hash,
                                          std::span<const size_t> positions, int32_t layer,
                                          ContentKind kind, size_t item_bytes, const std::byte* got,
                                          std::vector<std::byte>& scratch) {
  const size_t count = positions.empty() ? prefix_hash.size() : positions.size();
  if (item_bytes == 8) {
    for (size_t i = 0; i < count; ++i) {
      const size_t pos = positions.empty() ? i : positions[i];
      if (item_word(item_state(prefix_hash[pos], pos, layer, kind)) != load_word(got + i * 8)) {
        return i;
      }
    }
    return count;
  }
  scratch.resize(item_bytes);
  for (size_t i = 0; i < count; ++i) {
    const size_t pos = positions.empty() ? i : positions[i];
    fill_item(prefix_hash[pos], pos, layer, kind, scratch);
    if (std::memcmp(scratch.data(), got + i * item_bytes, item_bytes) != 0) return i;
  }
  return count;
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
