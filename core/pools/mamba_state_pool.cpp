#include "core/pools/mamba_state_pool.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {
namespace {

std::optional<SlotIndex> alloc_one(PagedSlotAllocator& allocator) {
  std::optional<IndexVector> slots = allocator.alloc(1);
  if (!slots) return std::nullopt;
  KV_ASSERT(slots->size() == 1, "state allocator handed out a multi-slot page");
  return (*slots)[0];
}

void free_one(PagedSlotAllocator& allocator, SlotIndex slot) {
  allocator.free(IndexVector(allocator.tier(), {slot}));
}

// One copy_async per layer: an item is contiguous in either layout.
void copy_slot_async(Backend& backend, StreamId stream, const KVPool& pool,
                     const PagedSlotAllocator& allocator, SlotIndex source, SlotIndex target) {
  KV_ASSERT(source != target, "state copy-on-write onto its own slot " + std::to_string(source));
  KV_ASSERT(allocator.is_allocated(source),
            "state copy from unallocated slot " + std::to_string(source));
  KV_ASSERT(allocator.is_allocated(target),
            "state copy into unallocated slot " + std::to_string(target));
  const KVPoolView& view = pool.view();
  for (int32_t layer = 0; layer < view.layer_count; ++layer) {
    backend.copy_async(stream, view.block, view.offset(layer, target), view.block,
                       view.offset(layer, source), view.item_bytes, "mamba state copy-on-write");
  }
}

int64_t checked_state_count(int64_t state_count) {
  KV_ASSERT(state_count > 0, "state pool needs slots");
  return state_count;
}

}  // namespace

MambaStatePool::MambaStatePool(Backend& backend, int64_t state_count, int32_t layer_count,
                               size_t state_bytes)
    : backend_(backend),
      pool_(backend, checked_state_count(state_count) + 1, layer_count, state_bytes),
      allocator_(Tier::kDevice, state_count, 1) {
  KV_ASSERT(pool_.slot_count() == allocator_.slot_count(), "state pool and allocator disagree");
}

std::optional<SlotIndex> MambaStatePool::alloc() {
  return alloc_one(allocator_);
}

void MambaStatePool::free(SlotIndex slot) {
  free_one(allocator_, slot);
}

void MambaStatePool::copy_state_async(StreamId stream, SlotIndex source, SlotIndex target) {
  copy_slot_async(backend_, stream, pool_, allocator_, source, target);
}

void MambaStatePool::write_state_async(StreamId stream, int32_t layer, SlotIndex slot,
                                       std::span<const std::byte> bytes) {
  pool_.write_item_async(stream, layer, slot, bytes);
}

std::vector<std::byte> MambaStatePool::read_state_sync(int32_t layer, SlotIndex slot) {
  return pool_.read_item_sync(layer, slot);
}

HostMambaStatePool::HostMambaStatePool(Backend& backend, int64_t state_count, int32_t layer_count,
                                       size_t state_bytes, KVLayout layout)
    : backend_(backend),
      pool_(backend, checked_state_count(state_count) + 1, layer_count, state_bytes, layout),
      allocator_(Tier::kHost, state_count, 1) {
  KV_ASSERT(pool_.slot_count() == allocator_.slot_count(), "state pool and allocator disagree");
}

std::optional<SlotIndex> HostMambaStatePool::alloc() {
  return alloc_one(allocator_);
}

void HostMambaStatePool::free(SlotIndex slot) {
  free_one(allocator_, slot);
}

void HostMambaStatePool::copy_state_async(StreamId stream, SlotIndex source, SlotIndex target) {
  copy_slot_async(backend_, stream, pool_, allocator_, source, target);
}

void HostMambaStatePool::write_state(int32_t layer, SlotIndex slot,
                                     std::span<const std::byte> bytes) {
  pool_.write_item(layer, slot, bytes);
}

std::vector<std::byte> HostMambaStatePool::read_state(int32_t layer, SlotIndex slot) const {
  return pool_.read_item(layer, slot);
}

}  // namespace kvsim
