// MemoryStorage: an in-memory StorageBackend (std::map keyed by page digest), with an optional
// capacity in pages and in bytes.
//
// Contract (in addition to StorageBackend's, storage_backend.h):
//  1. A capacity of 0 means unlimited. Otherwise page_count() <= capacity_pages and
//     usage().bytes <= capacity_bytes always: a set() of a new key into a full store first drops
//     least recently used pages until the new one fits. A payload larger than capacity_bytes on
//     its own is refused with kIoError (the store is left as it was).
//  2. Recency is a logical counter, never wall time. It advances on a set() that stores a new
//     page and on a get() that hits. exists(), batch_exists() and a deduplicated set() do not
//     count as a use.
//  3. Each page keeps a 64-bit checksum of its bytes, taken at set(). get() recomputes it: a
//     mismatch (only possible through damage_for_testing) is kCorrupt and the page stays until
//     remove(). exists() does not verify (a memory page cannot be damaged in real use).
//  4. Otherwise never fails: get() is kOk, kMiss or kCorrupt; set() is kOk unless (1) refuses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/tiers/storage_backend.h"

namespace kvsim {

class MemoryStorage final : public StorageBackend {
 public:
  explicit MemoryStorage(size_t capacity_pages = 0, uint64_t capacity_bytes = 0)
      : capacity_pages_(capacity_pages), capacity_bytes_(capacity_bytes) {}
  std::string_view name() const override { return "memory"; }
  bool exists(const PageDigest& key) override { return pages_.count(key) != 0; }
  StorageStatus get(const PageDigest& key, std::vector<std::byte>* out) override;
  StorageStatus set(const PageDigest& key, std::span<const std::byte> payload) override;
  void remove(const PageDigest& key) override;
  size_t page_count() const override { return pages_.size(); }
  Usage usage() const override { return {pages_.size(), bytes_}; }
  size_t capacity_pages() const { return capacity_pages_; }
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t evictions() const { return evictions_; }

  // Fault injection (the simulator's storage faults): the stored bytes of `key`, which the
  // caller may change without updating the checksum; null when absent.
  std::vector<std::byte>* damage_for_testing(const PageDigest& key);

 private:
  struct Page {
    std::vector<std::byte> bytes;
    uint64_t checksum = 0;
    uint64_t last_use = 0;
    uint64_t size = 0;  // as stored (damage may resize `bytes`)
  };
  // Result checks (read only; mutate.py leaves check_* bodies alone).
  void check_got(const PageDigest& key, const std::vector<std::byte>& out) const;
  void check_stored(const PageDigest& key, std::span<const std::byte> payload, size_t pages_before,
                    uint64_t evictions_before, size_t room_pages, uint64_t room_bytes) const;
  void check_removed(const PageDigest& key, size_t pages_before, uint64_t bytes_before,
                     uint64_t page_size) const;

  size_t capacity_pages_;
  uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  uint64_t evictions_ = 0;
  uint64_t clock_ = 0;
  std::map<PageDigest, Page> pages_;
  std::map<uint64_t, PageDigest> lru_;  // last_use → key; one entry per page
};

}  // namespace kvsim
