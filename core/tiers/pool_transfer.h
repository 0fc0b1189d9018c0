// PoolTransfer: the part of a device↔host operation that moves one side pool (SWA KV, Mamba
// state, a sparse-attention index buffer) alongside the main KV pool — SGLang's PoolTransfer.
//
// A transfer is a value: it holds its own host-resident index vectors, copied from wherever
// the caller found them. Resolving it for a kernel (CacheController::resolve) builds new
// device-resident index objects; the transfer, and the tree state it was copied from, are
// never changed (seed 001). Every resolved index buffer is recorded on the copy stream before
// it is freed (seed 000).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/types.h"
#include "core/pools/index_vector.h"

namespace kvsim {

// Do not renumber: embedded in traces.
enum class PoolName : uint8_t { kKv = 0, kSwa = 1, kMamba = 2, kIndexer = 3 };
inline constexpr size_t kPoolNamesMax = 4;

// Which pages of a prefix a side pool needs (SGLang's PoolHitPolicy).
enum class PoolHitPolicy : uint8_t {
  kAllPages = 0,       // every page of the prefix (full KV, indexer keys)
  kTrailingPages = 1,  // only the last pages (a sliding window, a recurrent state)
};

constexpr std::string_view to_string(PoolName p) {
  switch (p) {
    case PoolName::kKv:
      return "kv";
    case PoolName::kSwa:
      return "swa";
    case PoolName::kMamba:
      return "mamba";
    case PoolName::kIndexer:
      return "indexer";
  }
  return "?";
}

struct PoolTransfer {
  PoolName pool = PoolName::kSwa;
  IndexVector host_indices{Tier::kHost, {}};
  IndexVector device_indices{Tier::kDevice, {}};
  PoolHitPolicy hit_policy = PoolHitPolicy::kTrailingPages;
  std::vector<NodeId> nodes;  // tree nodes whose slots these are
};

}  // namespace kvsim
