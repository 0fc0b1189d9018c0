// MemoryStorage: an in-memory StorageBackend (std::map keyed by page digest), with an optional
// capacity in pages.
//
// Contract (in addition to StorageBackend's, storage_backend.h):
//  1. capacity_pages == 0 means unlimited. Otherwise page_count() <= capacity_pages always: a
//     set() of a new key into a full store first drops the least recently used page.
//  2. Recency is a logical counter, never wall time. It advances on a set() that stores a new
//     page and on a get() that hits. exists(), batch_exists() and a deduplicated set() do not
//     count as a use.
//  3. Never fails: get() is kOk or kMiss; set() is always kOk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/tiers/storage_backend.h"

namespace kvsim {

class MemoryStorage final : public StorageBackend {
 public:
  explicit MemoryStorage(size_t capacity_pages = 0) : capacity_pages_(capacity_pages) {}
  std::string_view name() const override { return "memory"; }
  bool exists(const PageDigest& key) override { return pages_.count(key) != 0; }
  StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) override;
  StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) override;
  void remove(const PageDigest& key) override;
  size_t page_count() const override { return pages_.size(); }
  size_t capacity_pages() const { return capacity_pages_; }

 private:
  struct Page {
    std::vector<std::byte> bytes;
    uint64_t last_use = 0;
  };
  size_t capacity_pages_;
  uint64_t clock_ = 0;
  std::map<PageDigest, Page> pages_;
  std::map<uint64_t, PageDigest> lru_;  // last_use → key; one entry per page
};

}  // namespace kvsim
