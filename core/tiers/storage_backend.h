// StorageBackend: the storage tier (SGLang's L3) — whole KV pages keyed by their page hash.
// A payload is one page's bytes for all layers ([token][layer][item]).
//
// Operating errors (a missing, corrupt or unreadable page) are values, never exceptions:
// callers treat anything but kOk as a miss. set() deduplicates: an existing key is kept.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "core/common/types.h"

namespace kvsim {

// Do not renumber: embedded in traces.
enum class StorageStatus : uint8_t { kOk = 0, kMiss = 1, kCorrupt = 2, kIoError = 3 };

std::string_view to_string(StorageStatus status);

class StorageBackend {
 public:
  virtual ~StorageBackend() = default;
  virtual std::string_view name() const = 0;
  virtual bool exists(const PageDigest& key) = 0;
  // How many leading keys exist (stops at the first miss).
  size_t batch_exists(std::span<const PageDigest> keys) {
    size_t n = 0;
    while (n < keys.size() && exists(keys[n]))
      ++n;
    return n;
  }
  virtual StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) = 0;
  virtual StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) = 0;
  virtual void remove(const PageDigest& key) = 0;
  virtual size_t page_count() const = 0;
};

}  // namespace kvsim
