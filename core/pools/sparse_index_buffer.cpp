#include "core/pools/sparse_index_buffer.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {
namespace {

// page_size is checked before the pool is built, so a bad one fails with its own message.
int32_t checked_page_size(int32_t page_size) {
  KV_ASSERT(page_size > 0, "sparse index buffer page_size must be positive");
  return page_size;
}

}  // namespace

SparseIndexBuffer::SparseIndexBuffer(Backend& backend, int64_t page_count, int32_t layer_count,
                                     size_t bytes_per_page, int32_t page_size)
    : pages_(backend, page_count, layer_count, bytes_per_page),
      page_size_(checked_page_size(page_size)) {
  KV_ASSERT(bytes_per_page % 8 == 0, "sparse index page bytes must be a multiple of 8");
  KV_ASSERT(pages_.block().kind == MemoryKind::kDevice, "sparse index buffer off the device");
}

void SparseIndexBuffer::check_page(int32_t layer, int64_t page) const {
  KV_ASSERT(layer >= 0 && layer < layer_count(), "sparse index layer " + std::to_string(layer) +
                                                     " outside [0, " +
                                                     std::to_string(layer_count()) + ")");
  KV_ASSERT(page >= 0 && page < page_count(), "sparse index page " + std::to_string(page) +
                                                  " outside [0, " + std::to_string(page_count()) +
                                                  ")");
}

void SparseIndexBuffer::write_page_async(StreamId stream, int32_t layer, int64_t page,
                                         std::span<const std::byte> bytes) {
  check_page(layer, page);
  KV_ASSERT(bytes.size() == bytes_per_page(),
            "sparse index page write of " + std::to_string(bytes.size()) + " bytes, page holds " +
                std::to_string(bytes_per_page()));
  pages_.write_item_async(stream, layer, page, bytes);
}

std::vector<std::byte> SparseIndexBuffer::read_page_sync(int32_t layer, int64_t page) {
  check_page(layer, page);
  std::vector<std::byte> bytes = pages_.read_item_sync(layer, page);
  KV_ASSERT(bytes.size() == bytes_per_page(), "sparse index page read of the wrong size");
  return bytes;
}

std::vector<int64_t> SparseIndexBuffer::pages_of(const IndexVector& token_slots) const {
  KV_ASSERT(token_slots.residency() == Residency::kHost,
            "residency: sparse index pages_of device-resident token slots");
  KV_ASSERT(token_slots.tier() == Tier::kDevice, "sparse index pages_of host-tier token slots");
  const size_t step = static_cast<size_t>(page_size_);
  KV_ASSERT(token_slots.size() % step == 0,
            "sparse index pages_of " + std::to_string(token_slots.size()) +
                " token slots: not whole pages of " + std::to_string(page_size_));
  std::vector<int64_t> pages;
  pages.reserve(token_slots.size() / step);
  for (size_t i = 0; i < token_slots.size(); i += step) {
    const SlotIndex first = token_slots[i];
    KV_ASSERT(first >= 0 && first % page_size_ == 0,
              "sparse index pages_of: slot " + std::to_string(first) + " is not page-aligned");
    for (size_t t = 1; t < step; ++t) {
      KV_ASSERT(token_slots[i + t] == first + static_cast<SlotIndex>(t),
                "sparse index pages_of: partial page at slot " + std::to_string(first));
    }
    const int64_t page = first / page_size_;
    KV_ASSERT(page < page_count(), "sparse index pages_of: slot " + std::to_string(first) +
                                       " is past the buffer's " + std::to_string(page_count()) +
                                       " pages");
    pages.push_back(page);
  }
  return pages;
}

}  // namespace kvsim
