// MemoryStorage: an in-memory StorageBackend with an optional capacity in pages; when full it
// drops the least recently used page (by a logical counter, never wall time).
#pragma once

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

 private:
  struct Page {
    std::vector<std::byte> bytes;
    uint64_t last_use = 0;
  };
  size_t capacity_pages_;
  uint64_t clock_ = 0;
  std::map<PageDigest, Page> pages_;
  std::map<uint64_t, PageDigest> lru_;  // last_use → key
};

}  // namespace kvsim
