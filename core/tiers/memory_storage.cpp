#include "core/tiers/memory_storage.h"

#include "core/common/assert.h"

namespace kvsim {

StorageStatus MemoryStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  KV_ASSERT(out != nullptr, "StorageBackend::get needs an output buffer");
  auto it = pages_.find(key);
  if (it == pages_.end()) return StorageStatus::kMiss;
  lru_.erase(it->second.last_use);
  it->second.last_use = ++clock_;
  lru_[it->second.last_use] = key;
  *out = it->second.bytes;
  return StorageStatus::kOk;
}

StorageStatus MemoryStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (pages_.count(key) != 0) return StorageStatus::kOk;
  if (capacity_pages_ != 0 && pages_.size() >= capacity_pages_) {
    KV_ASSERT(!lru_.empty(), "a full MemoryStorage has a least recently used page");
    const PageDigest victim = lru_.begin()->second;  // a copy: remove() erases the entry
    remove(victim);
  }
  Page page{std::vector<std::byte>(payload.begin(), payload.end()), ++clock_};
  lru_[page.last_use] = key;
  pages_.emplace(key, std::move(page));
  KV_VERIFY(lru_.size() == pages_.size(), "one recency entry per page");
  return StorageStatus::kOk;
}

void MemoryStorage::remove(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;
  lru_.erase(it->second.last_use);
  pages_.erase(it);
}

}  // namespace kvsim
