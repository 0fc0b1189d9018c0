// Storage for cache tests: a memory store a fixture constructs before CacheFixture (so the
// cache can point at it), and a store filled with a request's pages by a separate cache.
#pragma once

#include <vector>

#include "core/tiers/memory_storage.h"
#include "tests/support/cache_fixture.h"

namespace kvsim::testing {

// Base-from-member: list it before CacheFixture among a fixture's bases.
struct MemoryStorageHolder {
  MemoryStorage storage_;
};

// Fills `storage` with the pages of `tokens` in `ns`: a cache with `options` over it runs them
// as a request, flushes and backs every page up.
inline void populate_storage(MemoryStorage& storage, const HiCacheOptions& options, Namespace ns,
                             const std::vector<Token>& tokens) {
  struct Writer : CacheFixture {
    Writer(const HiCacheOptions& o, StorageBackend* s) : CacheFixture(o, s) {}
    void TestBody() override {}
  } writer(options, &storage);
  writer.run_request(ns, tokens);
  writer.cache_->flush();
  while (writer.cache_->storage_backup_step()) {
  }
  writer.cache_->check_hicache_events();
  writer.expect_sane();
}

}  // namespace kvsim::testing
