// hex64: a 64-bit hash as the project's traces spell it (event hashes, op checks, evict slot
// hashes): 16 lowercase hex digits, zero-padded. Header-only, so the Python module's recorder
// (which compiles a few sim files, not the whole simulator) formats hashes the same way.
#pragma once

#include <cstdint>
#include <string>

namespace kvsim::sim {

// Writes the 16 digits and a NUL into out[0, 17), without allocating.
inline void hex64(uint64_t v, char* out) {
  constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4)
    out[i] = kDigits[v & 0xF];
  out[16] = '\0';
}

inline std::string hex64(uint64_t v) {
  char buf[17];
  hex64(v, buf);
  return buf;
}

}  // namespace kvsim::sim
