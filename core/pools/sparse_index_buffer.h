// SparseIndexBuffer: the page-indexed device side buffer of sparse attention (SGLang's DSA/NSA
// `index_k_with_scale_buffer`): layers × pages × bytes_per_page, beside the device KV pool.
//
// Page p holds the indexer keys (with their scales) of device KV slots [p*page_size,
// (p+1)*page_size). The buffer is indexed by the same slots as the KV pool, so when those slots
// are freed and handed to another request, the other request's forward overwrites this page
// too. Anything that saves and restores a request's KV (retract-resume, cpu_copy.h) must save
// and restore these pages with it, or the resumed request reads foreign indexer data (seed 003).
//
// The storage is one DeviceKVPool whose "slot" is a page and whose item is one page's bytes,
// so view() is a KVPoolView that Backend::transfer_kv_async can gather and scatter by page.
// Host code never dereferences the device block: pages are written with write_page_async and
// read with read_page_sync (backend.h, rule 4).
//
// Invariants:
//  1. page_size, page_count (reserved page 0 included) and layer_count are positive;
//     bytes_per_page is a positive multiple of 8; none of them changes;
//  2. the block is allocated at construction and freed at destruction (DeviceKVPool);
//  3. every page access is bounds-checked (KV_ASSERT): layer in [0, layer_count), page in
//     [0, page_count), exactly bytes_per_page bytes;
//  4. pages_of() accepts only whole, aligned, in-range pages of device token slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/types.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/index_vector.h"

namespace kvsim {

class SparseIndexBuffer {
 public:
  // `page_count` includes the reserved page 0; it covers page_count * page_size KV slots.
  SparseIndexBuffer(Backend& backend, int64_t page_count, int32_t layer_count,
                    size_t bytes_per_page, int32_t page_size);
  SparseIndexBuffer(const SparseIndexBuffer&) = delete;
  SparseIndexBuffer& operator=(const SparseIndexBuffer&) = delete;

  // Slot = page, item = one page's bytes; layer_first.
  const KVPoolView& view() const { return pages_.view(); }
  const Block& block() const { return pages_.block(); }
  int64_t page_count() const { return pages_.slot_count(); }
  int32_t layer_count() const { return pages_.layer_count(); }
  size_t bytes_per_page() const { return pages_.item_bytes(); }
  int32_t page_size() const { return page_size_; }
  int64_t slot_count() const { return page_count() * page_size_; }  // KV slots covered

  // Enqueues a write of one page's bytes on `stream` (what the indexer does in a forward).
  void write_page_async(StreamId stream, int32_t layer, int64_t page,
                        std::span<const std::byte> bytes);
  // Reads one page after Backend::synchronize() (checks, tests, the content oracle).
  std::vector<std::byte> read_page_sync(int32_t layer, int64_t page);

  // The page of every page_size-th token slot: {4,5,6,7,12,13,14,15} → {1,3} at page_size 4.
  // KV_ASSERTs that `token_slots` is a host-resident device-tier list of whole, aligned pages
  // inside the buffer.
  std::vector<int64_t> pages_of(const IndexVector& token_slots) const;

 private:
  void check_page(int32_t layer, int64_t page) const;

  DeviceKVPool pages_;
  int32_t page_size_;
};

}  // namespace kvsim
