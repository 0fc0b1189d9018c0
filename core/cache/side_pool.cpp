#include "core/cache/side_pool.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {

SidePool::SidePool(Backend& backend, PoolName name, ComponentType component, SidePoolGeometry g)
    : name_(name),
      component_(component),
      device_slots_(Tier::kDevice, g.device_slots, g.page_size),
      host_slots_(Tier::kHost, g.host_slots, g.page_size),
      device_pool_(backend, g.device_slots + g.page_size, g.layer_count, g.item_bytes),
      host_pool_(backend, g.host_slots + g.page_size, g.layer_count, g.item_bytes, g.host_layout) {}

std::optional<IndexVector> SidePool::alloc_for_request(int64_t slots) {
  std::optional<IndexVector> v = device_slots_.alloc(slots);
  if (v) request_slots_.insert(v->slots().begin(), v->slots().end());
  return v;
}

void SidePool::free_from_request(const IndexVector& slots) {
  for (SlotIndex s : slots.slots()) {
    KV_ASSERT(request_slots_.erase(s) == 1, std::string(to_string(name_)) + " slot " +
                                                std::to_string(s) + " is not held by a request");
  }
  device_slots_.free(slots);
}

void SidePool::adopt(SlotIndex slot) {
  KV_ASSERT(request_slots_.erase(slot) == 1, std::string(to_string(name_)) + " slot " +
                                                 std::to_string(slot) +
                                                 " adopted by the tree but no request held it");
}

}  // namespace kvsim
