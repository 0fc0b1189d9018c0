// SHA-256 (FIPS 180-4), self-contained so the core takes no crypto dependency.
//
// Contract:
//  1. Sha256 is an incremental hasher: any sequence of update() calls whose concatenated input
//     is M, followed by finish(), returns SHA-256(M) — however M was split into updates.
//  2. finish() may be called once; update() or finish() after it is a programmer error
//     (KV_ASSERT). Sha256::hash() is the one-shot form.
//  3. Pure and deterministic: no allocation on the hashing path, no global state.
//  4. to_hex() writes two lowercase hex digits per byte, most significant nibble first.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvsim {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  using Digest = Sha256Digest;

  Sha256();
  void update(std::span<const uint8_t> bytes);
  void update(std::string_view text);
  Sha256Digest finish();  // invariant 2: once per object

  static Sha256Digest hash(std::span<const uint8_t> bytes);
  static Sha256Digest hash(std::string_view text);

 private:
  void compress(const uint8_t* block);
  void absorb(std::span<const uint8_t> bytes);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace kvsim
