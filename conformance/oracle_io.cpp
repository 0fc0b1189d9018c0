#include "conformance/oracle_io.h"

#include <vector>

#include "sim/model/content_oracle.h"

namespace kvsim::conformance {
namespace {

constexpr ComponentType kSwa = ComponentType::kSwa;
constexpr ComponentType kMamba = ComponentType::kMamba;

std::vector<std::byte> read(KVPool& pool, bool device, int32_t layer, SlotIndex slot) {
  if (device) return pool.read_item_sync(layer, slot);
  return static_cast<HostKVPool&>(pool).read_item(layer, slot);
}

// Positions [begin, begin + slots.size()) of `prefix` (full or SWA items).
std::optional<std::string> items_error(KVPool& pool, bool device, const IndexVector& slots,
                                       Namespace ns, std::span<const Token> prefix, size_t begin,
                                       bool swa, const std::string& what) {
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      const auto expected =
          swa ? sim::expected_swa_item(ns, prefix, begin + i, layer, pool.item_bytes())
              : sim::expected_item(ns, prefix, begin + i, layer, pool.item_bytes());
      if (read(pool, device, layer, slots[i]) != expected) {
        return what + " position " + std::to_string(begin + i) + " layer " + std::to_string(layer) +
               " (slot " + std::to_string(slots[i]) + ")";
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> state_error(KVPool& pool, bool device, SlotIndex slot, Namespace ns,
                                       std::span<const Token> prefix, size_t end,
                                       const std::string& what) {
  for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
    if (read(pool, device, layer, slot) !=
        sim::expected_mamba_state(ns, prefix, end, layer, pool.item_bytes())) {
      return what + " (state slot " + std::to_string(slot) + ") layer " + std::to_string(layer);
    }
  }
  return std::nullopt;
}

}  // namespace

void forward(HiCache& cache, const RequestKV& req, std::span<const Token> tokens, size_t from) {
  const StreamId compute = cache.backend().compute_stream();
  DeviceKVPool& kv = cache.device_pool();
  SidePool* swa = cache.side_pool(kSwa);
  for (size_t i = from; i < tokens.size(); ++i) {
    for (int32_t layer = 0; layer < kv.layer_count(); ++layer) {
      kv.write_item_async(compute, layer, req.kv()[i],
                          sim::expected_item(req.ns(), tokens, i, layer, kv.item_bytes()));
    }
    if (swa != nullptr) {
      DeviceKVPool& pool = swa->device_pool();
      for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
        pool.write_item_async(
            compute, layer, (*req.swa())[i],
            sim::expected_swa_item(req.ns(), tokens, i, layer, pool.item_bytes()));
      }
    }
  }
  if (SidePool* mamba = cache.side_pool(kMamba)) {
    const auto page = static_cast<size_t>(cache.options().page_size);
    const size_t aligned = tokens.size() / page * page;
    DeviceKVPool& pool = mamba->device_pool();
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      pool.write_item_async(
          compute, layer, *req.mamba_state(),
          sim::expected_mamba_state(req.ns(), tokens, aligned, layer, pool.item_bytes()));
    }
  }
}

std::optional<std::string> node_values_error(HiCache& cache, const TreeNode& node,
                                             ComponentType type, ValueTiers tiers) {
  if (node.is_root()) return std::nullopt;
  const std::vector<Token> prefix = RadixTree::prefix_tokens(node);
  const size_t begin = prefix.size() - node.key.size();
  const std::string where = "node " + std::to_string(node.id) + " ";
  const ComponentData& d = node.component(type);
  KVPool* device_pool = nullptr;
  KVPool* host_pool = nullptr;
  if (type == ComponentType::kFull) {
    device_pool = &cache.device_pool();
    host_pool = &cache.host_pool();
  } else if (SidePool* side = cache.side_pool(type)) {
    device_pool = &side->device_pool();
    host_pool = &side->host_pool();
  } else {
    return std::nullopt;  // the cache does not have this component
  }
  for (const bool device : {true, false}) {
    if (device ? !tiers.device : !tiers.host) continue;
    const std::optional<IndexVector>& v = device ? d.value : d.host_value;
    if (!v) continue;
    KVPool& pool = device ? *device_pool : *host_pool;
    const std::string what = where + std::string(to_string(type)) + (device ? " device" : " host");
    std::optional<std::string> error;
    if (type == kMamba) {
      error = state_error(pool, device, (*v)[0], node.ns, prefix, prefix.size(), what);
    } else {
      error = items_error(pool, device, *v, node.ns, prefix, begin, type == kSwa, what);
    }
    if (error) return error;
  }
  return std::nullopt;
}

std::optional<std::string> node_all_values_error(HiCache& cache, const TreeNode& node,
                                                 ValueTiers tiers) {
  for (const ComponentType t : {ComponentType::kFull, kSwa, kMamba}) {
    if (auto e = node_values_error(cache, node, t, tiers)) return e;
  }
  return std::nullopt;
}

std::optional<std::string> request_error(HiCache& cache, const RequestKV& req,
                                         std::span<const Token> tokens) {
  cache.backend().synchronize();
  const size_t n = tokens.size();
  const size_t cached = req.owned_from();
  if (auto e = items_error(cache.device_pool(), true, req.kv().slice(0, n), req.ns(), tokens, 0,
                           false, "request full KV")) {
    return e;
  }
  if (SidePool* swa = cache.side_pool(kSwa)) {
    const auto window = static_cast<size_t>(cache.options().swa_window_tokens);
    for (size_t i = cached > window ? cached - window : 0; i < n; ++i) {
      const SlotIndex s = (*req.swa())[i];
      if (s == 0) return "request SWA position " + std::to_string(i) + " has no slot";
      if (auto e = items_error(swa->device_pool(), true, IndexVector(Tier::kDevice, {s}), req.ns(),
                               tokens, i, true, "request SWA")) {
        return e;
      }
    }
  }
  if (SidePool* mamba = cache.side_pool(kMamba)) {
    const auto page = static_cast<size_t>(cache.options().page_size);
    if (auto e = state_error(mamba->device_pool(), true, *req.mamba_state(), req.ns(), tokens,
                             n / page * page, "request Mamba state")) {
      return e;
    }
  }
  return std::nullopt;
}

}  // namespace kvsim::conformance
