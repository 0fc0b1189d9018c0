#include "core/tiers/memory_storage.h"

namespace kvsim {

std::string_view to_string(StorageStatus status) {
  switch (status) {
    case StorageStatus::kOk:
      return "ok";
    case StorageStatus::kMiss:
      return "miss";
    case StorageStatus::kCorrupt:
      return "corrupt";
    case StorageStatus::kIoError:
      return "io_error";
  }
  return "?";
}

StorageStatus MemoryStorage::get(const PageDigest& key, std::vector<std::byte>* out) {
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
  if (capacity_pages_ != 0 && pages_.size() >= capacity_pages_) remove(lru_.begin()->second);
  Page page{std::vector<std::byte>(payload.begin(), payload.end()), ++clock_};
  lru_[page.last_use] = key;
  pages_.emplace(key, std::move(page));
  return StorageStatus::kOk;
}

void MemoryStorage::remove(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;
  lru_.erase(it->second.last_use);
  pages_.erase(it);
}

}  // namespace kvsim
