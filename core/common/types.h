// Vocabulary types shared by every core module.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvsim {

using Token = int32_t;       // a token id
using SlotIndex = int64_t;   // a token slot in a KV pool (device or host)
using NodeId = uint64_t;     // a radix-tree node id (0 is the root)
using RequestId = uint64_t;  // a request id, chosen by the caller
using Namespace = uint64_t;  // SGLang's extra_key: isolates tenants in the tree and in storage
using OpId = uint64_t;       // a cache-controller operation id

// Which pool a set of slot indices refers to. Do not renumber: embedded in traces.
enum class Tier : uint8_t { kDevice = 0, kHost = 1 };

// Where a buffer or an index vector physically lives. Do not renumber: embedded in traces.
enum class Residency : uint8_t { kHost = 0, kDevice = 1 };

constexpr std::string_view to_string(Tier t) {
  return t == Tier::kDevice ? "device" : "host";
}
constexpr std::string_view to_string(Residency r) {
  return r == Residency::kDevice ? "device" : "host";
}

}  // namespace kvsim

#include <array>

namespace kvsim {
// A SHA-256 digest naming one KV page in storage (see core/tiers/page_hash.h).
using PageDigest = std::array<uint8_t, 32>;
}  // namespace kvsim
