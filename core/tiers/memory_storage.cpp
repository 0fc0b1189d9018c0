#include "core/tiers/memory_storage.h"

#include <algorithm>
#include <string>

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
  check_got(key, *out);
  return StorageStatus::kOk;
}

StorageStatus MemoryStorage::set(const PageDigest& key, std::span<const std::byte> payload) {
  if (pages_.count(key) != 0) return StorageStatus::kOk;
  if (capacity_bytes_ != 0 && payload.size() > capacity_bytes_) return StorageStatus::kIoError;
  const size_t pages_before = pages_.size();
  const uint64_t evictions_before = evictions_;
  while ((capacity_pages_ != 0 && pages_.size() >= capacity_pages_) ||
         (capacity_bytes_ != 0 && bytes_ + payload.size() > capacity_bytes_)) {
    KV_ASSERT(!lru_.empty(), "a full MemoryStorage has a least recently used page");
    const PageDigest victim = lru_.begin()->second;  // a copy: remove() erases the entry
    KV_PROBE(store_memory_budget_evicts);
    remove(victim);
    ++evictions_;
  }
  const size_t room_pages = pages_.size();
  const uint64_t room_bytes = bytes_;
  Page page{std::vector<std::byte>(payload.begin(), payload.end()), checksum(payload), ++clock_,
            payload.size()};
  lru_[page.last_use] = key;
  bytes_ += payload.size();
  pages_.emplace(key, std::move(page));
  KV_VERIFY(lru_.size() == pages_.size(), "one recency entry per page");
  KV_VERIFY(capacity_bytes_ == 0 || bytes_ <= capacity_bytes_, "byte budget holds");
  check_stored(key, payload, pages_before, evictions_before, room_pages, room_bytes);
  return StorageStatus::kOk;
}

void MemoryStorage::remove(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;
  const size_t pages_before = pages_.size();
  const uint64_t bytes_before = bytes_;
  const uint64_t page_size = it->second.size;
  lru_.erase(it->second.last_use);
  bytes_ -= it->second.size;
  pages_.erase(it);
  check_removed(key, pages_before, bytes_before, page_size);
}

std::vector<std::byte>* MemoryStorage::damage_for_testing(const PageDigest& key) {
  auto it = pages_.find(key);
  return it == pages_.end() ? nullptr : &it->second.bytes;
}

// --- Result checks: each answer against the stored page itself (read only: no recency bump).

void MemoryStorage::check_got(const PageDigest& key, const std::vector<std::byte>& out) const {
  // [storage.result] a hit hands back the page's bytes as stored and makes it the most recent.
  const auto it = pages_.find(key);
  KV_ASSERT(it != pages_.end() && out.size() == it->second.size && out == it->second.bytes,
            "storage.result: get returned other bytes than the page stored");
  KV_ASSERT(!lru_.empty() && lru_.rbegin()->first == it->second.last_use &&
                lru_.rbegin()->second == key && it->second.last_use == clock_ &&
                lru_.size() == pages_.size(),
            "storage.result: a get hit is not the most recently used page");
}

void MemoryStorage::check_stored(const PageDigest& key, std::span<const std::byte> payload,
                                 size_t pages_before, uint64_t evictions_before, size_t room_pages,
                                 uint64_t room_bytes) const {
  // [storage.result] a new page is stored as given, most recent, counted once in pages and
  // bytes; each page evicted to make room is one eviction; the capacities hold.
  const auto it = pages_.find(key);
  KV_ASSERT(it != pages_.end() && it->second.size == payload.size() &&
                std::equal(payload.begin(), payload.end(), it->second.bytes.begin(),
                           it->second.bytes.end()),
            "storage.result: set stored other bytes than its payload");
  KV_ASSERT(pages_.size() == room_pages + 1 && bytes_ == room_bytes + payload.size() &&
                pages_before - room_pages == evictions_ - evictions_before &&
                lru_.rbegin()->second == key && it->second.last_use == lru_.rbegin()->first,
            "storage.result: set of a new page: " + std::to_string(pages_before) + " -> " +
                std::to_string(pages_.size()) + " page(s) with " +
                std::to_string(evictions_ - evictions_before) + " eviction(s), " +
                std::to_string(room_bytes) + " -> " + std::to_string(bytes_) + " byte(s) for a " +
                std::to_string(payload.size()) + "-byte page");
  KV_ASSERT(capacity_pages_ == 0 || pages_.size() <= capacity_pages_,
            "storage.result: set exceeds the page capacity");
}

void MemoryStorage::check_removed(const PageDigest& key, size_t pages_before, uint64_t bytes_before,
                                  uint64_t page_size) const {
  // [storage.result] a removed page is gone, with its bytes and its recency entry.
  KV_ASSERT(pages_.count(key) == 0 && pages_.size() + 1 == pages_before &&
                bytes_ + page_size == bytes_before && lru_.size() == pages_.size(),
            "storage.result: remove left " + std::to_string(pages_.size()) + " of " +
                std::to_string(pages_before) + " page(s), " + std::to_string(bytes_) + " of " +
                std::to_string(bytes_before) + " byte(s) for a " + std::to_string(page_size) +
                "-byte page");
}

}  // namespace kvsim
