// StorageBackend: the storage tier (SGLang's L3) — whole KV pages keyed by their page hash
// (core/tiers/page_hash.h). A payload is one page's bytes for all layers ([token][layer][item]);
// the backend treats it as opaque bytes of any length, including zero.
//
// Contract every implementation honours (tests/core/tiers/storage_backend_test.cpp checks it):
//  1. Operating errors are values, never exceptions or crashes: a missing page is kMiss, a page
//     whose stored bytes fail validation is kCorrupt, a failing read or write is kIoError.
//     Callers treat anything but kOk from get() as a miss.
//  2. get() returns kOk only with the exact bytes given to the set() that stored the key; on
//     any other status *out is left unchanged. A null `out` is a programmer error (KV_ASSERT).
//  3. set() deduplicates: if exists(key), it returns kOk and keeps the stored bytes (page keys
//     are content hashes, so equal keys name equal pages).
//  4. batch_exists(keys) is the number of LEADING keys for which exists() holds; it stops at the
//     first miss (a prefix's pages are only usable up to the first gap).
//  5. remove() of an absent key is a no-op. page_count() counts stored pages.
//  6. Deterministic: no clock, no randomness, no threads; wherever keys are enumerated they are
//     enumerated in sorted order. (FileStorage reads file times only to order the pages it finds
//     on disk at start and to age out stale temp files; see file_storage.h.)
//  7. usage() is what the store holds now: pages and payload-plus-format bytes.
#pragma once

#include <cstddef>
#include <cstdint>
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
  // Invariant 4. The default asks exists() key by key; a backend may batch the query.
  virtual size_t batch_exists(std::span<const PageDigest> keys) {
    size_t n = 0;
    while (n < keys.size() && exists(keys[n]))
      ++n;
    return n;
  }
  virtual StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) = 0;
  virtual StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) = 0;
  virtual void remove(const PageDigest& key) = 0;
  virtual size_t page_count() const = 0;
  struct Usage {
    uint64_t pages = 0;
    uint64_t bytes = 0;
  };
  virtual Usage usage() const = 0;
};

}  // namespace kvsim
