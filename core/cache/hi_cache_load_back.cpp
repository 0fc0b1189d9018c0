// HiCache load-back: bring the evicted bottom segment of a matched path back to the device,
// with what the auxiliary components need there (the SWA window, the Mamba state).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/swa_component.h"

namespace kvsim {
namespace {

const SwaComponent* find_swa(const RadixTree& tree) {
  for (const auto& c : tree.components()) {
    if (c->type() == ComponentType::kSwa) return static_cast<const SwaComponent*>(c.get());
  }
  return nullptr;
}

// [load_back.gate] The reference decision of a load-back's two gates (SGLang's load_back has
// the same two): a chain shorter than load_back_threshold_tokens is not loaded, then one longer
// than the caller's memory quota is declined (a load of exactly the quota goes on). SGLang also
// adds to its quota the evictable tokens its ancestor lock just took (`delta`); the core takes
// the quota its caller passes as it is.
enum class LoadBackGate { kBelowThreshold, kOverQuota, kGoesOn };

LoadBackGate reference_load_back_gate(bool chain_empty, int64_t tokens, int64_t threshold,
                                      std::optional<int64_t> mem_quota) {
  if (!chain_empty && tokens < threshold) return LoadBackGate::kBelowThreshold;
  if (mem_quota.has_value() && tokens > *mem_quota) return LoadBackGate::kOverQuota;
  return LoadBackGate::kGoesOn;
}

std::string check_load_back_gate(LoadBackGate taken, bool chain_empty, int64_t tokens,
                                 int64_t threshold, std::optional<int64_t> mem_quota) {
  const LoadBackGate reference =
      reference_load_back_gate(chain_empty, tokens, threshold, mem_quota);
  if (taken == reference) return "";
  auto name = [](LoadBackGate g) {
    return g == LoadBackGate::kBelowThreshold ? "below the threshold"
           : g == LoadBackGate::kOverQuota    ? "over the quota"
                                              : "goes on";
  };
  return std::string("load_back.gate: a load-back of ") + std::to_string(tokens) +
         " host token(s) (threshold " + std::to_string(threshold) + ", quota " +
         (mem_quota ? std::to_string(*mem_quota) : std::string("none")) + ") was taken as " +
         name(taken) + "; the reference says it " + name(reference);
}

}  // namespace

void HiCache::wait_for_load(int producer) {
  if (producer < 0) return;
  LayerDoneCounter& counter = controller_->layer_done_counter();
  counter.set_consumer(producer);
  for (int32_t layer = 0; layer < counter.layer_count(); ++layer)
    counter.wait_until(backend_, backend_.compute_stream(), layer);
}

int HiCache::ready_to_load_host_cache() {
  const int producer = controller_->start_loading();
  const int early = std::exchange(issued_early_producer_, -1);
  const int handed_out = producer >= 0 ? producer : early;
  // [load.handout] recomputed from the controller: the batch's forward waits on the latest load
  // issued since the last handout (one load stream, so it covers every earlier one), whoever
  // issued it (this call, or a read that issued the queue early).
  const int latest = controller_->take_latest_issued();
  KV_ASSERT(handed_out == latest, "load.handout: ready_to_load_host_cache hands out producer " +
                                      std::to_string(handed_out) + ", but the latest load " +
                                      "issued since the last handout is producer " +
                                      std::to_string(latest));
  return handed_out;
}

void HiCache::wait_for_loads_of(const TreeNode& node) {
  if (controller_->load_queued(node.id)) {
    KV_PROBE(lb_read_issues_queued_load);
    issued_early_producer_ = controller_->start_loading();
  }
  controller_->wait_for_loads_of(node.id, backend_.compute_stream());
}

LoadBackResult HiCache::init_load_back(TreeNode& best_match_node,
                                       std::optional<int64_t> mem_quota) {
  const int64_t counted_before = stats_.load_back_tokens;
  const bool pending_before = load_pending(best_match_node.id);
  LoadBackResult result = load_back(best_match_node, mem_quota);
  const std::string broken =
      check_load_back_result(best_match_node, result, counted_before, pending_before);
  KV_ASSERT(broken.empty(), "load_back.result: " + broken);
  return result;
}

std::string HiCache::check_load_back_result(const TreeNode& best_match_node,
                                            const LoadBackResult& result, int64_t counted_before,
                                            bool pending_before) const {
  const int64_t counted = stats_.load_back_tokens - counted_before;
  const std::string who = "init_load_back at node " + std::to_string(best_match_node.id);
  const bool pending = pending_loads_.count(best_match_node.id) != 0;
  if (result.loaded) {
    // A load anchors the request on the match, queues one load for it and counts what it moved.
    if (result.last_node != &best_match_node || pending_before || !pending ||
        static_cast<int64_t>(result.device_indices.size()) != counted ||
        result.swa_loaded_tokens < 0 ||
        (counted == 0 && result.swa_loaded_tokens == 0 && !result.mamba_loaded)) {
      return who + " reports a load of " + std::to_string(result.device_indices.size()) +
             " slot(s), " + std::to_string(result.swa_loaded_tokens) + " SWA token(s), Mamba " +
             (result.mamba_loaded ? "loaded" : "not loaded") + ", anchored on node " +
             (result.last_node ? std::to_string(result.last_node->id) : std::string("null")) +
             "; load_back_tokens moved by " + std::to_string(counted) + ", a load for it " +
             (pending ? "is" : "is not") + " pending (" + (pending_before ? "was" : "was not") +
             " before)";
    }
    return "";
  }
  // Nothing loaded: no slots, nothing counted or queued, and the anchor the caller falls back to
  // is the first node on device walking up from the match (itself when it is on device).
  const TreeNode* device = &best_match_node;
  while (!device->is_root() && device->evicted())
    device = device->parent;
  if (result.last_node != device || !result.device_indices.empty() || counted != 0 ||
      result.swa_loaded_tokens != 0 || result.mamba_loaded || pending != pending_before) {
    return who + " loaded nothing, yet reports " + std::to_string(result.device_indices.size()) +
           " slot(s), " + std::to_string(result.swa_loaded_tokens) + " SWA token(s), Mamba " +
           (result.mamba_loaded ? "loaded" : "not loaded") + ", fallback node " +
           (result.last_node ? std::to_string(result.last_node->id) : std::string("null")) +
           " (the first device node up the path is " + std::to_string(device->id) +
           "); load_back_tokens moved by " + std::to_string(counted) + ", pending load " +
           (pending_before ? "before" : "not before") + " and " + (pending ? "after" : "not after");
  }
  return "";
}

LoadBackResult HiCache::load_back(TreeNode& best_match_node, std::optional<int64_t> mem_quota) {
  // The evicted chain from the anchor up to the first node still on device. The anchor is
  // best_match_node, the deepest node every component accepts (seed 002).
  std::vector<TreeNode*> chain;
  TreeNode* ancestor = &best_match_node;
  while (!ancestor->is_root() && ancestor->evicted()) {
    KV_ASSERT(ancestor->backed_up(), "No backup available on evicted nodes, should not happen");
    chain.push_back(ancestor);
    ancestor = ancestor->parent;
  }
  std::reverse(chain.begin(), chain.end());  // root→leaf

  // SWA: only the window ending at the anchor, never past its reset point (seed 002).
  std::vector<TreeNode*> swa_nodes;
  if (const SwaComponent* swa = find_swa(*tree_)) {
    for (TreeNode* n : swa->window_nodes(best_match_node)) {
      if (n->has_device(ComponentType::kSwa)) continue;
      KV_ASSERT(n->has_host(ComponentType::kSwa), "SWA load-back walked into node " +
                                                      std::to_string(n->id) +
                                                      " with neither device nor host value");
      swa_nodes.push_back(n);
    }
    std::reverse(swa_nodes.begin(), swa_nodes.end());
  }
  // Mamba: the anchor's own state.
  const bool mamba_needed = side_pool(ComponentType::kMamba) != nullptr &&
                            !best_match_node.is_root() &&
                            !best_match_node.has_device(ComponentType::kMamba);
  if (mamba_needed) {
    KV_ASSERT(best_match_node.has_host(ComponentType::kMamba),
              "Mamba load-back anchored on a node without a state");
  }

  LoadBackResult result;
  result.last_node = chain.empty() ? &best_match_node : ancestor;
  if (chain.empty() && swa_nodes.empty() && !mamba_needed) return result;

  IndexVector host_indices(Tier::kHost, {});
  for (TreeNode* n : chain)
    host_indices.append(*n->full().host_value);
  const auto tokens = static_cast<int64_t>(host_indices.size());
  const int64_t threshold = options_.load_back_threshold_tokens;
  auto gate_problem = [&](LoadBackGate taken) {
    return check_load_back_gate(taken, chain.empty(), tokens, threshold, mem_quota);
  };
  if (!chain.empty() && tokens < threshold) {
    KV_PROBE(lb_below_threshold);
    KV_VERIFY(gate_problem(LoadBackGate::kBelowThreshold).empty(),
              gate_problem(LoadBackGate::kBelowThreshold));
    return result;
  }
  if (mem_quota && tokens > *mem_quota) {
    KV_PROBE(lb_over_quota);
    KV_VERIFY(gate_problem(LoadBackGate::kOverQuota).empty(),
              gate_problem(LoadBackGate::kOverQuota));
    return result;
  }
  KV_VERIFY(gate_problem(LoadBackGate::kGoesOn).empty(), gate_problem(LoadBackGate::kGoesOn));
  KV_PROBE_IF(!swa_nodes.empty(), lb_swa_window);
  KV_PROBE_IF(mamba_needed && chain.empty(), lb_mamba_only);

  // Keep the device ancestors (and the SWA values already in the window) from being evicted
  // while we make room, and the host copies from being host-evicted until the load's ack.
  const LockRecord ancestor_lock = tree_->lock(*ancestor);
  std::vector<TreeNode*> swa_pinned;
  if (find_swa(*tree_) != nullptr) {
    for (TreeNode* n : find_swa(*tree_)->window_nodes(best_match_node)) {
      if (!n->has_device(ComponentType::kSwa)) continue;
      tree_->inc_aux_lock(*n, ComponentType::kSwa);
      swa_pinned.push_back(n);
    }
  }
  std::vector<TreeNode*> host_protected = chain;
  for (TreeNode* n : swa_nodes) {
    if (std::find(chain.begin(), chain.end(), n) == chain.end()) host_protected.push_back(n);
  }
  if (mamba_needed && chain.empty() &&
      std::find(host_protected.begin(), host_protected.end(), &best_match_node) ==
          host_protected.end()) {
    host_protected.push_back(&best_match_node);
  }
  for (TreeNode* n : host_protected)
    tree_->protect_host(*n);

  // Side-pool slots first (pre-allocation), rolled back if the main load cannot be placed.
  std::vector<PoolTransfer> extra;
  bool ok = true;
  if (!swa_nodes.empty()) {
    IndexVector swa_host(Tier::kHost, {});
    std::vector<NodeId> ids;
    for (TreeNode* n : swa_nodes) {
      swa_host.append(*n->component(ComponentType::kSwa).host_value);
      ids.push_back(n->id);
    }
    std::optional<IndexVector> dev = alloc_swa(static_cast<int64_t>(swa_host.size()));
    if (dev) {
      extra.push_back(PoolTransfer{.pool = PoolName::kSwa,
                                   .host_indices = std::move(swa_host),
                                   .device_indices = std::move(*dev),
                                   .hit_policy = PoolHitPolicy::kTrailingPages,
                                   .nodes = std::move(ids)});
    } else {
      KV_PROBE(lb_side_alloc_fails);
      ok = false;
    }
  }
  if (ok && mamba_needed) {
    std::optional<SlotIndex> state = alloc_mamba_state();
    if (state) {
      extra.push_back(
          PoolTransfer{.pool = PoolName::kMamba,
                       .host_indices = *best_match_node.component(ComponentType::kMamba).host_value,
                       .device_indices = IndexVector(Tier::kDevice, {*state}),
                       .hit_policy = PoolHitPolicy::kTrailingPages,
                       .nodes = {best_match_node.id}});
    } else {
      KV_PROBE(lb_side_alloc_fails);
      ok = false;
    }
  }
  std::optional<IndexVector> device;
  if (ok) {
    device = controller_->load(host_indices, best_match_node.id, extra);
    if (!device) {
      KV_PROBE(lb_evicts_to_fit);
      begin_allocation();
      const int64_t free_before = device_slots_->available_size();
      if (options_.sglang_eviction_amounts) {
        KV_PROBE(lb_evicts_sglang_amount);
        evict(tokens);
      } else {
        evict(tokens - free_before);
      }
      // SGLang's surplus is excused; a needless eviction is not.
      note_eviction(tokens, free_before, device_slots_->available_size());
      device = controller_->load(host_indices, best_match_node.id, extra);
      KV_PROBE_IF(!device, lb_fails_after_evicting);
      if (!device) note_failed_allocation();
    }
  }
  tree_->unlock(ancestor_lock);
  for (TreeNode* n : swa_pinned)
    tree_->dec_aux_lock(*n, ComponentType::kSwa);
  if (!device) {
    for (const PoolTransfer& pt : extra) {  // roll the pre-allocations back
      side_[static_cast<size_t>(pt.pool)]->free_from_request(pt.device_indices);
    }
    for (TreeNode* n : host_protected)
      tree_->release_host(*n);
    return result;
  }

  size_t offset = 0;
  PendingLoad pending;
  for (TreeNode* n : chain) {
    const size_t len = n->key.size();
    tree_->set_device_value(*n, device->slice(offset, offset + len));
    offset += len;
  }
  for (const PoolTransfer& pt : extra) {
    SidePool& pool = *side_[static_cast<size_t>(pt.pool)];
    const ComponentType type = pool.component();
    size_t at = 0;
    for (NodeId id : pt.nodes) {
      TreeNode* n = tree_->find(id);
      const size_t len = type == ComponentType::kMamba ? 1 : n->key.size();
      IndexVector slots = pt.device_indices.slice(at, at + len);
      pool.adopt(slots);
      tree_->set_aux_value(*n, type, std::move(slots));
      at += len;
    }
    if (type == ComponentType::kSwa) result.swa_loaded_tokens = static_cast<int64_t>(at);
    if (type == ComponentType::kMamba) result.mamba_loaded = true;
  }
  for (TreeNode* n : host_protected)
    pending.protected_nodes.push_back(n->id);
  // The new device slots are written by the pending copy: no eviction until its ack.
  pending.lock = tree_->lock(best_match_node);
  KV_ASSERT(pending_loads_.count(best_match_node.id) == 0, "two loads for one node");
  pending_loads_.emplace(best_match_node.id, std::move(pending));
  stats_.load_back_tokens += tokens;
  result.device_indices = std::move(*device);
  result.last_node = &best_match_node;
  result.loaded = true;
  const std::string broken = check_load_back_window(best_match_node);
  KV_ASSERT(broken.empty(), "load_back.window_whole: " + broken);
  return result;
}

std::string HiCache::check_load_back_window(TreeNode& anchor) const {
  if (anchor.is_root()) return "";
  if (!anchor.has_device(ComponentType::kFull)) {
    return "anchor node " + std::to_string(anchor.id) + " has no device KV";
  }
  if (const SwaComponent* swa = find_swa(*tree_)) {
    for (const TreeNode* n : swa->window_nodes(anchor)) {
      if (!n->has_device(ComponentType::kSwa)) {
        return "node " + std::to_string(n->id) + " of the SWA window ending at node " +
               std::to_string(anchor.id) + " has no device SWA value";
      }
    }
  }
  if (side_pool(ComponentType::kMamba) != nullptr && !anchor.has_device(ComponentType::kMamba)) {
    return "anchor node " + std::to_string(anchor.id) + " has no device Mamba state";
  }
  return "";
}

}  // namespace kvsim
