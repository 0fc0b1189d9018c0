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
      host_pool_(backend, g.host_slots + g.page_size, g.layer_count, g.item_bytes, g.host_layout),
      request_slots_(std::string(to_string(name)), g.device_slots / g.page_size, g.page_size) {}

std::optional<IndexVector> SidePool::alloc_for_request(int64_t slots) {
  std::optional<IndexVector> v = device_slots_.alloc(slots);
  if (v) request_slots_.hold(*v);
  return v;
}

void SidePool::free_from_request(const IndexVector& slots) {
  request_slots_.release(slots);  // asserts the request held every page
  device_slots_.free(slots);
}

}  // namespace kvsim
