// HiCache: the side pools of hybrid models (SWA KV, Mamba state) — request slots, aux
// eviction (tombstones), backup transfers, and their ownership checks.
#include <set>
#include <string>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/common/probe.h"

namespace kvsim {

IndexVector HiCache::path_swa_slots(const TreeNode& node) const {
  std::vector<const TreeNode*> chain;
  for (const TreeNode* n = &node; !n->is_root(); n = n->parent)
    chain.push_back(n);
  std::vector<SlotIndex> slots;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const ComponentData& d = (*it)->component(ComponentType::kSwa);
    if (d.value) {
      slots.insert(slots.end(), d.value->slots().begin(), d.value->slots().end());
    } else {
      slots.insert(slots.end(), (*it)->key.size(), 0);
    }
  }
  return IndexVector(Tier::kDevice, std::move(slots));
}

std::optional<IndexVector> HiCache::alloc_swa(int64_t tokens) {
  SidePool* pool = side_pool(ComponentType::kSwa);
  KV_ASSERT(pool != nullptr, "alloc_swa without an SWA component");
  if (tokens == 0) return IndexVector(Tier::kDevice, {});                   // documented no-op
  if (tokens < 0 || tokens % options_.page_size != 0) return std::nullopt;  // caller error
  begin_allocation();
  const int64_t free_before = pool->device_slots().available_size();
  const int64_t shortfall = tokens - free_before;
  if (shortfall > 0) {
    evict_swa(shortfall);
    note_eviction(tokens, free_before, pool->device_slots().available_size());
  }
  std::optional<IndexVector> slots = pool->alloc_for_request(tokens);
  if (!slots) note_failed_allocation();
  return slots;
}

void HiCache::free_swa(const IndexVector& slots) {
  SidePool* pool = side_pool(ComponentType::kSwa);
  KV_ASSERT(pool != nullptr, "free_swa without an SWA component");
  if (slots.empty()) return;  // documented no-op
  pool->free_from_request(slots);
}

std::optional<SlotIndex> HiCache::alloc_mamba_state() {
  SidePool* pool = side_pool(ComponentType::kMamba);
  KV_ASSERT(pool != nullptr, "alloc_mamba_state without a Mamba component");
  begin_allocation();
  const int64_t free_before = pool->device_slots().available_size();
  if (free_before < 1) {
    evict_mamba(1);
    note_eviction(1, free_before, pool->device_slots().available_size());
  }
  std::optional<IndexVector> v = pool->alloc_for_request(1);
  if (!v) {
    note_failed_allocation();
    return std::nullopt;
  }
  return (*v)[0];
}

void HiCache::free_mamba_state(SlotIndex slot) {
  SidePool* pool = side_pool(ComponentType::kMamba);
  KV_ASSERT(pool != nullptr, "free_mamba_state without a Mamba component");
  pool->free_from_request(IndexVector(Tier::kDevice, {slot}));
}

void HiCache::copy_mamba_state(SlotIndex src, SlotIndex dst) {
  SidePool* pool = side_pool(ComponentType::kMamba);
  KV_ASSERT(pool != nullptr, "copy_mamba_state without a Mamba component");
  KV_ASSERT(src != dst, "copy-on-write needs disjoint src/dst slots");
  const KVPoolView& view = pool->device_pool().view();
  for (int32_t layer = 0; layer < view.layer_count; ++layer) {
    backend_.copy_async(backend_.compute_stream(), view.block, view.offset(layer, dst), view.block,
                        view.offset(layer, src), view.item_bytes, "mamba copy-on-write");
  }
}

int64_t HiCache::evict_aux(ComponentType type, int64_t slots) {
  SidePool* pool = side_pool(type);
  KV_ASSERT(pool != nullptr, "aux eviction without the component");
  const int64_t free_before = pool->device_slots().available_size();
  int64_t freed = 0;
  last_victim_ = 0;
  while (freed < slots) {
    TreeNode* victim = tree_->next_aux_victim(type);
    if (victim == nullptr) break;
    const auto n = static_cast<int64_t>(victim->component(type).value->size());
    if (victim->device_leaf_key.has_value()) {
      // A device leaf keeps nothing worth its full KV once its window or state is gone.
      KV_PROBE(aux_evict_device_leaf);
      if (!evict_device_victim(*victim)) break;
      last_victim_ = n;
      freed += n;
    } else {
      KV_PROBE(aux_tombstone);
      last_victim_ = n;
      freed += n;
      pool->device_slots().free(tree_->take_aux_value(*victim, type));
    }
  }
  eviction_exhausted_ = freed < slots;
  // [evict.result] what an aux eviction returns is what its device pool gained (a device-leaf
  // victim's whole eviction frees its value there too; nothing is allocated there meanwhile).
  KV_ASSERT(freed == pool->device_slots().available_size() - free_before,
            "evict.result: evict_" + std::string(type == ComponentType::kSwa ? "swa" : "mamba") +
                "(" + std::to_string(slots) + ") returns " + std::to_string(freed) +
                " slot(s); the pool gained " +
                std::to_string(pool->device_slots().available_size() - free_before));
  return freed;
}

namespace {

// The surplus an eviction left beyond `need` (0 when none): the last victim was needed unless
// what is free without it already covers the need. One rule for every pool (invariant 6c).
int64_t over_evicted(int64_t need, int64_t free_after, int64_t last_victim) {
  return last_victim > 0 && free_after - need >= last_victim ? free_after - need : 0;
}

}  // namespace

void HiCache::note_eviction(int64_t need, int64_t free_before, int64_t free_after) {
  if (free_before >= need && free_after > free_before) ++stats_.needless_evictions;
  tally_over_eviction(over_evicted(need, free_after, last_victim_));
}

void HiCache::note_failed_allocation() {
  if (!eviction_exhausted_) ++stats_.under_evicted_allocations;
}

void HiCache::note_host_eviction(int64_t need, int64_t free_before) {
  if (free_before >= need && host_slots_->available_size() > free_before) {
    ++stats_.needless_evictions;
  }
  const int64_t surplus = over_evicted(need, host_slots_->available_size(), last_host_victim_);
  tally_over_eviction(surplus);
}

void HiCache::free_released(const ReleasedSlots& released) {
  if (released.device[0]) device_slots_->free(*released.device[0]);
  if (released.host[0]) host_slots_->free(*released.host[0]);
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    if (!released.device[t] && !released.host[t]) continue;
    KV_ASSERT(side_[t] != nullptr, "released aux slots of an absent component");
    if (released.device[t]) side_[t]->device_slots().free(*released.device[t]);
    if (released.host[t]) side_[t]->host_slots().free(*released.host[t]);
  }
}

std::optional<IndexVector> HiCache::alloc_side_host(SidePool& pool, int64_t slots) {
  std::optional<IndexVector> host = pool.host_slots().alloc(slots);
  // Host-only leaves carry their aux host slots: evict them one by one until it fits.
  while (!host) {
    TreeNode* victim = tree_->next_host_victim();
    if (victim == nullptr) return std::nullopt;
    // Evict only while the allocation does not fit (invariant evict.over_eviction).
    KV_ASSERT(pool.host_slots().available_size() < slots,
              "evict.over_eviction: a side host eviction past the point where " +
                  std::to_string(slots) + " slots fit");
    KV_PROBE(aux_host_evicts_for_side);
    stats_.evicted_host_tokens += victim->token_count();
    free_released(tree_->remove_host_leaf(*victim));
    host = pool.host_slots().alloc(slots);
  }
  return host;
}

std::vector<PoolTransfer> HiCache::backup_transfers(TreeNode& node) {
  std::vector<PoolTransfer> extra;
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    const auto type = static_cast<ComponentType>(t);
    if (!side_[t] || !node.has_device(type) || node.has_host(type)) continue;
    const IndexVector& device = *node.component(type).value;
    std::optional<IndexVector> host =
        alloc_side_host(*side_[t], static_cast<int64_t>(device.size()));
    if (!host) {  // no room: this node's aux data is not backed up (a tombstone later)
      KV_PROBE(aux_backup_skipped);
      continue;
    }
    extra.push_back(PoolTransfer{.pool = side_[t]->name(),
                                 .host_indices = std::move(*host),
                                 .device_indices = device,
                                 .hit_policy = PoolHitPolicy::kTrailingPages,
                                 .nodes = {node.id}});
  }
  return extra;
}

void HiCache::release_aux_insert(const AuxInsertValues& aux, const InsertResult& result) {
  if (aux.swa) {
    SidePool& pool = *side_[index_of(ComponentType::kSwa)];
    const std::set<SlotIndex> adopted(result.swa_adopted.begin(), result.swa_adopted.end());
    if (!result.swa_adopted.empty()) pool.adopt(IndexVector(Tier::kDevice, result.swa_adopted));
    std::vector<SlotIndex> rest;
    for (size_t i = aux.owned_from; i < aux.swa->size(); ++i) {
      const SlotIndex s = (*aux.swa)[i];
      if (s != 0 && adopted.count(s) == 0) rest.push_back(s);
    }
    if (!rest.empty()) pool.free_from_request(IndexVector(Tier::kDevice, std::move(rest)));
  }
  if (aux.mamba) {
    SidePool& pool = *side_[index_of(ComponentType::kMamba)];
    if (result.mamba_adopted) {
      pool.adopt(IndexVector(Tier::kDevice, {*aux.mamba}));
    } else {
      pool.free_from_request(IndexVector(Tier::kDevice, {*aux.mamba}));
    }
  }
}

}  // namespace kvsim
