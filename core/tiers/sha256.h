// SHA-256 (FIPS 180-4), self-contained so the core takes no crypto dependency.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kvsim {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  Sha256Digest finish();  // the object must not be used afterwards

  static Sha256Digest hash(std::span<const uint8_t> bytes);

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace kvsim
