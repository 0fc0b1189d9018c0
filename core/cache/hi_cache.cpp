#include "core/cache/hi_cache.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/mamba_component.h"
#include "core/tree/swa_component.h"

namespace kvsim {
namespace {

// Rounds a pool size down to whole pages; fewer than one page (unless 0 means "default") is a
// caller error.
void round_pool_to_pages(int64_t& tokens, int64_t page, const char* field, bool zero_ok) {
  if (zero_ok && tokens == 0) return;
  if (tokens < page) {
    throw std::invalid_argument("HiCache: " + std::string(field) + " = " + std::to_string(tokens) +
                                " holds no whole page of " + std::to_string(page) + " tokens");
  }
  tokens = tokens / page * page;
}

}  // namespace

HiCache::HiCache(Backend& backend, HiCacheOptions options, StorageBackend* storage)
    : backend_(backend), options_(options), storage_(storage) {
  const int64_t page = options_.page_size;
  // Caller mistakes in the options are errors, not aborts (docs/sglang-parity.md): pool sizes
  // are rounded down to whole pages as SGLang's allocator does; less than a page is an error.
  if (page <= 0) throw std::invalid_argument("HiCache: page_size must be positive");
  round_pool_to_pages(options_.device_tokens, page, "device_tokens", /*zero_ok=*/false);
  round_pool_to_pages(options_.host_tokens, page, "host_tokens", /*zero_ok=*/false);
  round_pool_to_pages(options_.swa_device_tokens, page, "swa_device_tokens", /*zero_ok=*/true);
  round_pool_to_pages(options_.swa_host_tokens, page, "swa_host_tokens", /*zero_ok=*/true);
  if (const char* n = std::getenv("KVSIM_TEST_SEGV_AT_INSERT")) segv_at_insert_ = std::atoll(n);
  device_slots_ = std::make_unique<PagedSlotAllocator>(Tier::kDevice, options_.device_tokens,
                                                       options_.page_size);
  request_slots_ =
      std::make_unique<RequestSlots>("device", options_.device_tokens / page, options_.page_size);
  host_slots_ =
      std::make_unique<PagedSlotAllocator>(Tier::kHost, options_.host_tokens, options_.page_size);
  // Each pool has one extra page: page 0 is reserved and never handed out.
  device_pool_ = std::make_unique<DeviceKVPool>(backend_, options_.device_tokens + page,
                                                options_.layer_count, options_.item_bytes);
  host_pool_ =
      std::make_unique<HostKVPool>(backend_, options_.host_tokens + page, options_.layer_count,
                                   options_.item_bytes, options_.host_layout);
  tree_ = std::make_unique<RadixTree>(RadixTreeOptions{
      .page_size = options_.page_size,
      .eviction_policy = options_.eviction_policy,
      .check_backup_contiguity = options_.write_policy != WritePolicy::kWriteBack});
  controller_ = std::make_unique<CacheController>(
      backend_, *device_pool_, *device_slots_, *host_pool_, *host_slots_,
      CacheControllerOptions{.page_size = options_.page_size});
  if (options_.has_swa()) {
    const int64_t dev =
        options_.swa_device_tokens > 0 ? options_.swa_device_tokens : options_.device_tokens;
    const int64_t host =
        options_.swa_host_tokens > 0 ? options_.swa_host_tokens : options_.host_tokens;
    KV_ASSERT(dev % page == 0 && host % page == 0, "SWA pool sizes must be page multiples");
    side_[index_of(ComponentType::kSwa)] =
        std::make_unique<SidePool>(backend_, PoolName::kSwa, ComponentType::kSwa,
                                   SidePoolGeometry{.device_slots = dev,
                                                    .host_slots = host,
                                                    .page_size = options_.page_size,
                                                    .layer_count = options_.layer_count,
                                                    .item_bytes = options_.item_bytes,
                                                    .host_layout = options_.host_layout});
    tree_->add_component(std::make_unique<SwaComponent>(options_.swa_window_tokens));
  }
  if (options_.has_mamba()) {
    KV_ASSERT(options_.mamba_state_bytes > 0 && options_.mamba_state_bytes % 8 == 0,
              "mamba_state_bytes must be a positive multiple of 8");
    const int64_t host = options_.mamba_host_states > 0 ? options_.mamba_host_states
                                                        : 2 * options_.mamba_device_states;
    side_[index_of(ComponentType::kMamba)] =
        std::make_unique<SidePool>(backend_, PoolName::kMamba, ComponentType::kMamba,
                                   SidePoolGeometry{.device_slots = options_.mamba_device_states,
                                                    .host_slots = host,
                                                    .page_size = 1,
                                                    .layer_count = options_.mamba_layer_count,
                                                    .item_bytes = options_.mamba_state_bytes,
                                                    .host_layout = KVLayout::kLayerFirst});
    tree_->add_component(std::make_unique<MambaComponent>());
  }
  for (const auto& side : side_) {
    if (side) controller_->add_side_pool(side->name(), side->device_pool(), side->host_pool());
  }
}

HiCache::~HiCache() = default;

MatchResult HiCache::match_prefix(Namespace ns, std::span<const Token> tokens) {
  return tree_->match_prefix(ns, tokens);
}

InsertResult HiCache::insert(Namespace ns, std::span<const Token> tokens, const IndexVector& value,
                             const AuxInsertValues& aux) {
  // Test-only (docs/hunt.md, "Crashes"): a planted SIGSEGV at the cache's Nth insert, named by
  // KVSIM_TEST_SEGV_AT_INSERT, so the hunt's crash recorder and replay/shrink of a crash trace
  // have a crash to work on in a separate process. Unset: never fires.
  if (segv_at_insert_ > 0 && ++inserts_ == segv_at_insert_) {
    volatile int* null_page = nullptr;
    *null_page = 1;
  }
  InsertResult result = tree_->insert(ns, tokens, value, aux);
  release_aux_insert(aux, result);
  const size_t page = static_cast<size_t>(options_.page_size);
  const size_t aligned = tokens.size() / page * page;
  // The tree adopted every slot past the device prefix: they are no longer request-owned.
  if (static_cast<size_t>(result.prefix_len) < aligned) {
    request_slots_->release(value.slice(static_cast<size_t>(result.prefix_len), aligned));
  }
  if (storage_ != nullptr) {
    for (TreeNode* n : RadixTree::path_to(*result.last_node))
      compute_node_hashes(*n);
  }
  const int64_t policy_written_before = stats_.policy_write_tokens;
  if (!aux.chunked) {
    apply_write_policy(result.hit_nodes);
    KV_VERIFY(check_write_through_path(result).empty(), check_write_through_path(result));
  }
  // [insert.chunked_no_write] a chunk's insert (SGLang's cache_unfinished_req) leaves the write
  // policy alone: _inc_hit_count returns at once for a chunked request.
  KV_VERIFY(!aux.chunked || stats_.policy_write_tokens == policy_written_before,
            "insert.chunked_no_write: a chunked insert wrote " +
                std::to_string(stats_.policy_write_tokens - policy_written_before) +
                " token(s) through by the write policy");
  return result;
}

void HiCache::apply_write_policy(const std::vector<TreeNode*>& hit_nodes) {
  if (!options_.hierarchical) return;
  if (options_.write_policy == WritePolicy::kWriteBack) return;
  const auto threshold = static_cast<uint64_t>(options_.write_through_threshold());
  for (TreeNode* node : hit_nodes) {  // root→leaf, so parents are backed up first
    if (!node->backed_up() && !node->evicted() && node->hit_count >= threshold) {
      stats_.policy_write_tokens += write_backup(*node);
    }
  }
}

std::optional<IndexVector> HiCache::alloc_device(int64_t tokens) {
  if (tokens == 0) return IndexVector(Tier::kDevice, {});                   // documented no-op
  if (tokens < 0 || tokens % options_.page_size != 0) return std::nullopt;  // caller error
  begin_allocation();
  const int64_t free_before = device_slots_->available_size();
  const int64_t shortfall = tokens - free_before;
  if (shortfall > 0) {
    evict(shortfall);
    note_eviction(tokens, free_before, device_slots_->available_size());
  }
  std::optional<IndexVector> slots = device_slots_->alloc(tokens);
  if (slots) {
    request_slots_->hold(*slots);
  } else {
    note_failed_allocation();
  }
  return slots;
}

void HiCache::free_device(const IndexVector& slots) {
  if (slots.empty()) return;       // documented no-op
  request_slots_->release(slots);  // asserts every page is request-held
  device_slots_->free(slots);
}

int64_t HiCache::available_device_size() const {
  return device_slots_->available_size();
}

std::optional<IndexVector> HiCache::alloc_host(int64_t tokens) {
  std::optional<IndexVector> slots = host_slots_->alloc(tokens);
  if (!slots) {
    KV_PROBE(cache_alloc_host_evicts);
    begin_allocation();
    const int64_t free_before = host_slots_->available_size();
    evict_host(tokens - free_before);
    note_host_eviction(tokens, free_before);
    slots = host_slots_->alloc(tokens);
    KV_PROBE_IF(!slots, cache_alloc_host_fails);
    if (!slots) note_failed_allocation();
  }
  return slots;
}

int64_t HiCache::write_backup(TreeNode& node) {
  const int64_t queued_before = stats_.write_through_tokens;
  const int64_t written = backup_node(node);
  const std::string broken = check_backup_result(node, written, queued_before);
  KV_ASSERT(broken.empty(), "backup.result: " + broken);
  return written;
}

std::string HiCache::check_backup_result(const TreeNode& node, int64_t written,
                                         int64_t counted_before) const {
  const int64_t counted = stats_.write_through_tokens - counted_before;
  const int64_t copy = node.backed_up() ? static_cast<int64_t>(node.full().host_value->size()) : 0;
  const auto pending = pending_writes_.find(node.id);
  const bool queued = pending != pending_writes_.end() && node.write_through_pending == node.id &&
                      node.full().lock_ref > 0 && node.has_device(ComponentType::kFull);
  if (written != copy || counted != copy || (copy > 0) != queued || !node.backup_tried ||
      (copy > 0 && copy != node.token_count())) {
    return "write_backup of node " + std::to_string(node.id) + " (" +
           std::to_string(node.token_count()) + " tokens) returns " + std::to_string(written) +
           "; the node holds a host copy of " + std::to_string(copy) + " token(s), " +
           (queued ? "a write queued" : "no write queued") + ", write_through_tokens moved by " +
           std::to_string(counted) + (node.backup_tried ? "" : ", backup_tried unset");
  }
  return "";
}

int64_t HiCache::backup_node(TreeNode& node) {
  KV_ASSERT(!node.is_root() && !node.evicted() && !node.backed_up(), "nothing to back up");
  node.backup_tried = true;
  if (options_.write_policy != WritePolicy::kWriteBack && !node.parent->is_root() &&
      !node.parent->backed_up()) {
    KV_PROBE(cache_backup_parent_not_backed);
    return 0;  // backed-up nodes must form a root-closed prefix
  }
  const std::vector<PoolTransfer> extra = backup_transfers(node);
  std::optional<IndexVector> host = controller_->write(*node.full().value, node.id, extra);
  if (!host) {
    KV_PROBE(cache_backup_evicts_host);
    begin_allocation();
    const int64_t free_before = host_slots_->available_size();
    if (options_.sglang_eviction_amounts) {
      KV_PROBE(cache_backup_evicts_sglang_amount);
      evict_host(node.token_count());
    } else {
      evict_host(node.token_count() - free_before);
    }
    // On both branches: SGLang's surplus is excused.
    note_host_eviction(node.token_count(), free_before);
    host = controller_->write(*node.full().value, node.id, extra);
    if (!host) note_failed_allocation();
  }
  if (!host) {
    KV_PROBE(cache_backup_fails);
    KV_PROBE_IF(!extra.empty(), cache_backup_aux_rollback);
    for (const PoolTransfer& pt : extra)
      side_[static_cast<size_t>(pt.pool)]->host_slots().free(pt.host_indices);
    return 0;
  }
  tree_->set_host_value(node, std::move(*host));
  for (const PoolTransfer& pt : extra) {
    tree_->set_aux_host_value(node, static_cast<ComponentType>(pt.pool), pt.host_indices);
  }
  node.write_through_pending = node.id;
  // The source device slots must not be evicted while the copy reads them.
  pending_writes_[node.id] = PendingWrite{tree_->lock(node)};
  stats_.write_through_tokens += node.token_count();
  return node.token_count();
}

int64_t HiCache::evict(int64_t device_tokens) {
  const int64_t free_before = device_slots_->available_size();
  const int64_t evicted_before = stats_.evicted_device_tokens;
  int64_t freed = 0;
  last_victim_ = 0;
  while (freed < device_tokens) {
    TreeNode* victim = tree_->next_device_victim();
    if (victim == nullptr) {
      KV_PROBE(cache_evict_short);
      break;
    }
    const int64_t tokens = victim->token_count();
    if (!evict_device_victim(*victim)) break;  // it stays the next victim: nothing more now
    last_victim_ = tokens;
    freed += tokens;
  }
  eviction_exhausted_ = freed < device_tokens;
  // [evict.result] what evict returns is what the device pool gained and the statistics count
  // (no device allocation happens inside an eviction: a write-back victim's copy only reads).
  KV_ASSERT(freed == device_slots_->available_size() - free_before &&
                freed == stats_.evicted_device_tokens - evicted_before,
            "evict.result: evict(" + std::to_string(device_tokens) + ") returns " +
                std::to_string(freed) + " token(s); the device pool gained " +
                std::to_string(device_slots_->available_size() - free_before) +
                " and evicted_device_tokens moved by " +
                std::to_string(stats_.evicted_device_tokens - evicted_before));
  return freed;
}

bool HiCache::evict_device_victim(TreeNode& victim) {
  const int64_t tokens = victim.token_count();
  if (victim.backed_up()) {
    free_released(tree_->demote(victim));
  } else if (options_.hierarchical && options_.write_policy == WritePolicy::kWriteBack) {
    if (!evict_one_write_back(victim)) return false;
  } else {
    // The write policy was applied: under write-through a node hit often enough to be backed
    // up was at least tried (the host may have been full); dropping it untried loses a copy
    // the policy promised (a bug that breaks no other invariant, only host hits).
    KV_ASSERT(!options_.hierarchical || victim.backup_tried ||
                  victim.hit_count < static_cast<uint64_t>(options_.write_through_threshold()),
              "write policy not applied: a node hit past the write-through threshold is "
              "evicted from the device without a backup ever being tried");
    free_released(tree_->remove_device_leaf(victim));
  }
  stats_.evicted_device_tokens += tokens;
  return true;
}

bool HiCache::evict_one_write_back(TreeNode& victim) {
  // Write the leaf to host before dropping its device copy; wait for the copy, since the
  // device slots are freed right after.
  if (const int64_t written = write_backup(victim); written > 0) {
    KV_PROBE(cache_evict_write_back);
    stats_.evict_write_tokens += written;
    flush();
    free_released(tree_->demote(victim));
    return true;
  }
  // No host room (the host pool may be smaller than the node, or held by protected nodes).
  // backup_node's evict_host ran out of host leaves before it freed enough, so any evicted
  // descendant still hanging off the victim is one it could not take: locked (a load-back or
  // prefetch in flight), or above a locked one. The victim stays (found by `kvsim hunt`: a
  // write-back victim with host-only children and a full host pool asserted at removal). Until
  // session 29 such descendants were dropped when none was locked; that branch never ran in
  // four sessions of hunts and mutants, for the reason above, which is now asserted.
  if (!victim.children.empty()) {
    KV_ASSERT(has_locked_descendant(victim),
              "write-back victim " + std::to_string(victim.id) +
                  ": no host room after evict_host, yet none of its host-only descendants is "
                  "locked (evict_host should have taken them)");
    return false;
  }
  KV_PROBE(cache_evict_write_back_no_room);
  free_released(tree_->remove_device_leaf(victim));
  return true;
}

bool HiCache::has_locked_descendant(const TreeNode& node) const {
  std::vector<const TreeNode*> stack;
  node.children.append_in_reverse_key_order(stack);
  while (!stack.empty()) {
    const TreeNode* n = stack.back();
    stack.pop_back();
    if (n->full().lock_ref > 0 || n->full().host_lock_ref > 0) return true;
    n->children.append_in_reverse_key_order(stack);
  }
  return false;
}

int64_t HiCache::evict_host(int64_t host_tokens) {
  const int64_t free_before = host_slots_->available_size();
  int64_t freed = 0;
  last_host_victim_ = 0;
  KV_PROBE_IF(
      host_tokens > 0 && (!pending_loads_.empty() || !backups_.empty() || !prefetches_.empty()),
      cache_host_evict_while_protected);
  while (freed < host_tokens) {
    TreeNode* victim = tree_->next_host_victim();
    if (victim == nullptr) {
      KV_PROBE(cache_host_evict_short);
      break;
    }
    last_host_victim_ = victim->token_count();
    freed += victim->token_count();
    free_released(tree_->remove_host_leaf(*victim));
  }
  eviction_exhausted_ = freed < host_tokens;
  stats_.evicted_host_tokens += freed;
  // [evict.result] what evict_host returns is what the host pool gained.
  KV_ASSERT(freed == host_slots_->available_size() - free_before,
            "evict.result: evict_host(" + std::to_string(host_tokens) + ") returns " +
                std::to_string(freed) + " token(s); the host pool gained " +
                std::to_string(host_slots_->available_size() - free_before));
  return freed;
}

void HiCache::check_hicache_events() {
  for (const TransferAck& ack : controller_->poll_write_acks())
    finish_write_ack(ack);
  for (const TransferAck& ack : controller_->poll_load_acks())
    finish_load_ack(ack);
  for (NodeId id : finished_backups_) {
    if (TreeNode* node = tree_->find(id)) tree_->release_host(*node);
  }
  finished_backups_.clear();
  drain_prefetch_hits();
}

void HiCache::flush() {
  backend_.synchronize();
  check_hicache_events();
}

void HiCache::finish_write_ack(const TransferAck& ack) {
  for (NodeId id : ack.node_ids) {
    auto it = pending_writes_.find(id);
    KV_ASSERT(it != pending_writes_.end(),
              "write ack for node " + std::to_string(id) + " with no pending write");
    TreeNode* node = tree_->find(id);
    KV_ASSERT(node != nullptr, "node with a pending write vanished");
    // Fragments split off the node while the copy ran are published with it.
    for (TreeNode* n = node; !n->is_root() && n->write_through_pending == id; n = n->parent) {
      KV_PROBE_IF(n != node, cache_write_ack_fragments);
      n->write_through_pending.reset();
    }
    tree_->unlock(it->second.lock);
    pending_writes_.erase(it);
    if (storage_ != nullptr) enqueue_storage_backup(*node);
  }
}

void HiCache::finish_load_ack(const TransferAck& ack) {
  // [load.ack_tokens] an ack reports the FULL tokens its load moved: its KV sources' host slots.
  size_t kv_tokens = 0;
  for (const LoadSource& src : ack.sources)
    if (src.pool == PoolName::kKv) kv_tokens += src.host.size();
  KV_ASSERT(ack.tokens == static_cast<int64_t>(kv_tokens),
            "load.ack_tokens: load ack " + std::to_string(ack.id) + " reports " +
                std::to_string(ack.tokens) + " token(s), its sources hold " +
                std::to_string(kv_tokens));
  for (NodeId id : ack.node_ids) {
    auto it = pending_loads_.find(id);
    KV_ASSERT(it != pending_loads_.end(),
              "load ack for node " + std::to_string(id) + " with no pending load");
    tree_->unlock(it->second.lock);
    for (NodeId p : it->second.protected_nodes) {
      TreeNode* n = tree_->find(p);
      KV_ASSERT(n != nullptr, "host-protected node vanished during its load");
      tree_->release_host(*n);
    }
    pending_loads_.erase(it);
  }
}

}  // namespace kvsim
