#include "core/tiers/memory_storage.h"

#include "core/common/assert.h"
#include "core/common/probe.h"

namespace kvsim {
namespace {

uint64_t checksum(std::span<const std::byte> bytes) {
  uint64_t h = 1469598103934665603ull ^ bytes.size();
  for (std::byte b : bytes)
    h = (h ^ static_cast<uint8_t>(b)) * 1099511628211ull;
  return h;
}

}  // namespace

StorageStatus MemoryStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
  KV_ASSERT(out != nullptr, "StorageBackend::get needs an output buffer");
  auto it = pages_.find(key);
  if (it == pages_.end()) return StorageStatus::kMiss;
  if (checksum(it->second.bytes) != it->second.checksum) return StorageStatus::kCorrupt;
  lru_.erase(it->second.last_use);
  it->second.last_use = ++clock_;
  lru_[it->second.last_use] = key;
  *out = it->second.bytes;
  return StorageStatus::kOk;
}

StorageStatus MemoryStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (pages_.count(key) != 0) return StorageStatus::kOk;
  if (capacity_bytes_ != 0 && payload.size() > capacity_bytes_) return StorageStatus::kIoError;
  while ((capacity_pages_ != 0 && pages_.size() >= capacity_pages_) ||
         (capacity_bytes_ != 0 && bytes_ + payload.size() > capacity_bytes_)) {
    KV_ASSERT(!lru_.empty(), "a full MemoryStorage has a least recently used page");
    const PageDigest victim = lru_.begin()->second;  // a copy: remove() erases the entry
    KV_PROBE(store_memory_budget_evicts);
    remove(victim);
    ++evictions_;
  }
  Page page{std::vector<std::byte>(payload.begin(), payload.end()), checksum(payload), ++clock_,
            payload.size()};
  lru_[page.last_use] = key;
  bytes_ += payload.size();
  pages_.emplace(key, std::move(page));
  KV_VERIFY(lru_.size() == pages_.size(), "one recency entry per page");
  KV_VERIFY(capacity_bytes_ == 0 || bytes_ <= capacity_bytes_, "byte budget holds");
  return StorageStatus::kOk;
}

void MemoryStorage::remove(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;
  lru_.erase(it->second.last_use);
  bytes_ -= it->second.size;
  pages_.erase(it);
}

std::vector<std::byte>* MemoryStorage::damage_for_testing(const PageDigest& key) {
  auto it = pages_.find(key);
  return it == pages_.end() ? nullptr : &it->second.bytes;
}

}  // namespace kvsim
