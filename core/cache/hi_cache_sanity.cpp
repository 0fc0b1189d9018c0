// HiCache::sanity_check: every invariant the core can verify on its own (see hi_cache.h).
#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/cache/hi_cache.h"
#include "core/tiers/page_hash.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

// [storage.hash_chain] The page-key format (core/tiers/page_hash.h, contract 1-3) written out
// plainly, one token at a time, as the reference the cached chains and page_hash.cpp's chunked
// encoder are both checked against: a key is SHA-256 of the previous key and each token id as
// four little-endian bytes; a namespace's chain starts from SHA-256("kvsim-ns" and the
// namespace as eight little-endian bytes).
PageDigest reference_namespace_seed(Namespace ns) {
  Sha256 h;
  h.update(std::string_view("kvsim-ns"));
  const auto v = static_cast<uint64_t>(ns);
  for (int i = 0; i < 8; ++i) {
    const uint8_t b = static_cast<uint8_t>(v >> (8 * i));
    h.update(std::span<const uint8_t>(&b, 1));
  }
  return h.finish();
}

std::vector<PageDigest> reference_hash_pages(PageDigest prev, std::span<const Token> tokens,
                                             size_t page) {
  std::vector<PageDigest> out;
  for (size_t first = 0; first + page <= tokens.size(); first += page) {
    Sha256 h;
    h.update(prev);
    for (const Token t : tokens.subspan(first, page)) {
      const auto u = static_cast<uint32_t>(t);
      const std::array<uint8_t, 4> le{static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8),
                                      static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 24)};
      h.update(le);
    }
    prev = h.finish();
    out.push_back(prev);
  }
  return out;
}

// Counts owners per page (slots are owned in whole pages: allocators hand out pages and the
// tree splits on page boundaries), so a check costs O(pages), not O(tokens); reports pages
// with two owners, owners of free pages, and owned runs that do not start on a page boundary.
class OwnershipMap {
 public:
  OwnershipMap(const PagedSlotAllocator& slots, std::string invariant)
      : slots_(slots),
        invariant_(std::move(invariant)),
        page_(slots.page_size()),
        shift_(std::has_single_bit(static_cast<uint64_t>(page_))
                   ? std::countr_zero(static_cast<uint64_t>(page_))
                   : -1),
        owners_(static_cast<size_t>(slots.page_count() + 1), 0) {}

  void own(const IndexVector& v, const char* owner, std::optional<NodeId> node,
           SanityReport& report) {
    if (v.size() % static_cast<size_t>(page_) != 0) {
      report.add(invariant_, std::string(owner) + " holds a partial page", node);
      return;
    }
    // This loop is most of a full sanity walk on a large pool: with a power-of-two page size
    // (the usual case) a page number is a shift and alignment a mask, not two divisions.
    const size_t step = static_cast<size_t>(page_);
    // One slot per page is read, a page of slots apart (4 KiB at 512 tokens): each read is a
    // cache and TLB miss, so ask for the reads a few pages ahead early.
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < v.size(); i += step) {
      if (i + kAhead * step < v.size()) __builtin_prefetch(v.address_of(i + kAhead * step));
      const SlotIndex s = v[i];
      const bool aligned = shift_ >= 0 ? (s & (page_ - 1)) == 0 : s % page_ == 0;
      const SlotIndex page = shift_ >= 0 ? s >> shift_ : s / page_;
      if (s < 0 || !aligned || static_cast<size_t>(page) >= owners_.size()) {
        report.add(invariant_, std::string(owner) + " holds a misaligned or out-of-range page",
                   node, s);
        continue;
      }
      if (++owners_[static_cast<size_t>(page)] == 2) {
        report.add(invariant_, std::string("slot has two owners, one is ") + owner, node, s);
      }
      if (!slots_.page_is_allocated(page)) {
        report.add(invariant_, std::string(owner) + " holds a free slot", node, s);
      }
    }
  }

  void check_unowned(SanityReport& report) const {
    for (size_t p = 1; p < owners_.size(); ++p) {
      const auto s = static_cast<SlotIndex>(p) * page_;
      if (owners_[p] == 0 && slots_.page_is_allocated(static_cast<int64_t>(p))) {
        report.add(invariant_, "allocated slot has no owner (leak)", std::nullopt, s);
      }
    }
  }

 private:
  const PagedSlotAllocator& slots_;
  std::string invariant_;
  SlotIndex page_;
  int shift_;  // log2(page_) when page_ is a power of two, else -1
  std::vector<uint8_t> owners_;
};

}  // namespace

void HiCache::sanity_check(SanityReport& report) const {
  sanity_check_parts(report, std::nullopt);
}

void HiCache::sanity_check_sliced(SanityReport& report, uint64_t round) const {
  sanity_check_parts(report,
                     std::pair<uint64_t, uint64_t>{round % kHashChainSlices, kHashChainSlices});
}

void HiCache::sanity_check_parts(SanityReport& report,
                                 std::optional<std::pair<uint64_t, uint64_t>> hash_slice) const {
  tree_->sanity_check(report);
  const std::string device_problem = device_slots_->check();
  if (!device_problem.empty()) report.add("slots.device_allocator", device_problem);
  const std::string host_problem = host_slots_->check();
  if (!host_problem.empty()) report.add("slots.host_allocator", host_problem);
  check_slot_ownership(report);
  check_side_pools(report);
  check_inflight(report);
  check_hash_chains(report, hash_slice);
  if (stats_.prefetch_abandoned_with_free_memory > 0) {
    report.add("prefetch.abandoned_with_free_memory",
               std::to_string(stats_.prefetch_abandoned_with_free_memory) +
                   " prefetch(es) revoked for host memory while enough whole pages were free");
  }
  if (controller_->live_index_buffers() != 0) {  // issue 11: transfer temporaries returned
    report.add("transfers.index_buffers_returned",
               std::to_string(controller_->live_index_buffers()) +
                   " transfer index buffer(s) uploaded and never released");
  }
  // [backend.memory_owned] the backend's live blocks are the pools' and the controller's.
  if (const std::string memory = controller_->memory_problem(); !memory.empty())
    report.add("backend.memory_owned", memory);
  if (stats_.over_evicted_tokens > 0) {
    report.add("evict.over_eviction", std::to_string(stats_.over_evicted_tokens) +
                                          " token(s) evicted beyond an allocation's shortfall "
                                          "plus its last victim");
  }
  // [stats.host_balance] every host copy the tree holds was placed by a backup or a finished
  // prefetch and leaves only by host eviction: the counters and the tree must add up.
  const int64_t placed = stats_.write_through_tokens + stats_.prefetched_tokens;
  if (placed - stats_.evicted_host_tokens != tree_->host_size()) {
    report.add("stats.host_balance",
               "host tokens placed " + std::to_string(placed) + " - evicted " +
                   std::to_string(stats_.evicted_host_tokens) + " != held by the tree " +
                   std::to_string(tree_->host_size()));
  }
  // [stats.write_back_on_evict] under write-back the policy writes a host copy only for a
  // device victim (HiCache::evict_one_write_back), never for a hit node as write-through does
  // (apply_write_policy). A caller may still back a node up itself (write_backup is public API:
  // the stateful property test does), so only the policy's own writes on hits are counted.
  if (options_.hierarchical && options_.write_policy == WritePolicy::kWriteBack &&
      stats_.policy_write_tokens > 0) {
    report.add("stats.write_back_on_evict", "write-back policy: the write policy wrote " +
                                                std::to_string(stats_.policy_write_tokens) +
                                                " token(s) of hit nodes through");
  }
  // ... and the eviction-time write is write-back's alone: under write-through (or in a flat
  // cache) a device victim without a host copy is dropped, never written out on its way.
  if ((!options_.hierarchical || options_.write_policy != WritePolicy::kWriteBack) &&
      stats_.evict_write_tokens > 0) {
    report.add("stats.write_back_on_evict",
               std::string(options_.hierarchical ? to_string(options_.write_policy) : "flat") +
                   " cache: " + std::to_string(stats_.evict_write_tokens) +
                   " token(s) of device victims written to host at eviction");
  }
  // Counters of decisions a reference or a rule disagreed with: always 0 on a correct core.
  auto counted = [&](const char* invariant, int64_t n, const std::string& what) {
    if (n > 0) report.add(invariant, std::to_string(n) + what);
  };
  counted("prefetch.rate_limit", stats_.prefetch_rate_divergences,
          " prefetch admission(s) decided against the rate limit's reference");
  counted("evict.needless", stats_.needless_evictions,
          " eviction(s) freed slots for an allocation its pool already had room for");
  counted("prefetch.deadline", stats_.prefetch_deadline_divergences,
          " progress check(s) used a prefetch deadline other than the reference's");
  counted("prefetch.query_threshold", stats_.prefetch_query_divergences,
          " storage quer(ies) kept or revoked a prefetch against the reference's threshold "
          "decision");
  {
    int64_t waiting = 0;
    for (const auto& [rid, tokens] : prefetch_loaded_)
      waiting += tokens;
    if (stats_.prefetch_reported_tokens + waiting != stats_.prefetched_tokens) {
      report.add("prefetch.reported_tokens",
                 std::to_string(stats_.prefetch_reported_tokens) +
                     " prefetched token(s) handed to requests + " + std::to_string(waiting) +
                     " waiting != " + std::to_string(stats_.prefetched_tokens) +
                     " inserted by finished prefetches");
    }
  }
  counted("evict.under_eviction", stats_.under_evicted_allocations,
          " allocation(s) failed while the eviction before them had victims left");
  for (const BackendViolation& v : backend_.violations()) {
    report.add(v.kind == "unordered_read" ? "stream_ordering" : "stream_lifetime",
               v.kind + ": " + v.detail);
  }
}

void HiCache::check_slot_ownership(SanityReport& report) const {
  OwnershipMap device(*device_slots_, "slots.device_ownership");
  OwnershipMap host(*host_slots_, "slots.host_ownership");
  tree_->for_each_node([&](const TreeNode& n) {
    if (n.is_root()) return;
    if (n.full().value) device.own(*n.full().value, "tree node", n.id, report);
    if (n.full().host_value) host.own(*n.full().host_value, "tree node", n.id, report);
  });
  device.own(request_slots_->held(), "request", std::nullopt, report);
  const std::string count_problem = request_slots_->check();
  if (!count_problem.empty()) report.add("slots.request_count", count_problem);
  for (const auto& [rid, op] : prefetches_) {
    if (!op.host_indices) continue;
    if (op.host_indices->residency() != Residency::kHost) {
      report.add("residency", "prefetch " + std::to_string(rid) + " holds device-resident indices");
    }
    host.own(*op.host_indices, "prefetch", std::nullopt, report);
  }
  device.check_unowned(report);
  host.check_unowned(report);
}

void HiCache::check_side_pools(SanityReport& report) const {
  // [tree.components] the tree has every component the options give it: full attention
  // always, SWA with a window, Mamba with Mamba states (what insert's assertions rely on).
  const std::pair<ComponentType, bool> configured[] = {
      {ComponentType::kFull, true},
      {ComponentType::kSwa, options_.has_swa()},
      {ComponentType::kMamba, options_.has_mamba()}};
  for (const auto& [type, want] : configured) {
    if (want && !tree_->has_component(type)) {
      report.add("tree.components", "the tree lacks the " + std::string(to_string(type)) +
                                        " component the options give it");
    }
  }
  for (const auto& pool : side_) {
    if (!pool) continue;
    const std::string name(to_string(pool->name()));
    const std::string device_problem = pool->device_slots().check();
    if (!device_problem.empty()) report.add("slots." + name + "_device_allocator", device_problem);
    const std::string host_problem = pool->host_slots().check();
    if (!host_problem.empty()) report.add("slots." + name + "_host_allocator", host_problem);
    OwnershipMap device(pool->device_slots(), "slots." + name + "_device_ownership");
    OwnershipMap host(pool->host_slots(), "slots." + name + "_host_ownership");
    const ComponentType type = pool->component();
    tree_->for_each_node([&](const TreeNode& n) {
      const ComponentData& d = n.component(type);
      if (d.value) device.own(*d.value, "tree node", n.id, report);
      if (d.host_value) host.own(*d.host_value, "tree node", n.id, report);
    });
    device.own(pool->request_slots().held(), "request", std::nullopt, report);
    const std::string count_problem = pool->request_slots().check();
    if (!count_problem.empty()) report.add("slots.request_count", count_problem);
    device.check_unowned(report);
    host.check_unowned(report);
  }
}

// [inflight.load_sources] recomputed from what the controller's loads read, not from the
// cache's own list of pending loads: every host slot a load reads, from its queueing to its
// ack, is held by a tree node that no eviction can remove (and so recycle its host slots under
// the copy). A node's host copy goes only with the node itself (remove_host_leaf,
// remove_device_leaf), which needs it childless and unlocked, so a node is pinned while it is
// host-protected or device-locked, or has a pinned descendant (a split leaves the host
// protection on the suffix, below the new prefix).
void HiCache::check_load_sources(SanityReport& report) const {
  if (!controller_) return;
  const std::vector<LoadSource> sources = controller_->load_sources();
  if (sources.empty()) return;
  std::set<const TreeNode*> pinned;
  tree_->for_each_node([&](const TreeNode& n) {
    if (n.full().host_lock_ref <= 0 && n.full().lock_ref <= 0) return;
    for (const TreeNode* p = &n; p != nullptr; p = p->parent) {
      if (!pinned.insert(p).second) break;  // the rest of the path is in already
    }
  });
  // The tree node holding each host page, per component: a flat table by page (slots are held
  // in whole pages), built on first use (a map of every slot took a quarter of the
  // run time of swa_hicache_high_concurrency).
  std::array<std::vector<const TreeNode*>, kComponentTypesMax> owners;
  for (const LoadSource& src : sources) {
    ComponentType type = ComponentType::kFull;
    const PagedSlotAllocator* slots = host_slots_.get();
    if (src.pool != PoolName::kKv) {
      // Side pools are indexed by their pool name, as the load and backup paths index them.
      const auto at = static_cast<size_t>(src.pool);
      const SidePool* pool = at < side_.size() ? side_[at].get() : nullptr;
      if (pool == nullptr || pool->name() != src.pool) {
        report.add("inflight.load_sources",
                   "a load reads pool " + std::string(to_string(src.pool)) + ", not attached",
                   src.node);
        continue;
      }
      type = pool->component();
      slots = &pool->host_slots();
    }
    std::vector<const TreeNode*>& owner = owners[index_of(type)];
    const int64_t page = slots->page_size();
    if (owner.empty()) {
      owner.assign(static_cast<size_t>(slots->slot_count() / page + 1), nullptr);
      tree_->for_each_node([&](const TreeNode& n) {
        const ComponentData& d = n.component(type);
        if (n.is_root() || !d.host_value) return;
        // One slot a page: a node's run starts on a page boundary (slots.host_ownership).
        const std::vector<SlotIndex>& held = d.host_value->slots();
        for (size_t i = 0; i < held.size(); i += static_cast<size_t>(page)) {
          const auto at = static_cast<size_t>(held[i] / page);
          if (at < owner.size()) owner[at] = &n;
        }
      });
    }
    for (SlotIndex slot : src.host.slots()) {
      const auto at = static_cast<size_t>(slot / page);
      const TreeNode* holder = at < owner.size() ? owner[at] : nullptr;
      if (holder == nullptr) {
        report.add("inflight.load_sources",
                   "load of node " + std::to_string(src.node) + " reads " +
                       std::string(to_string(src.pool)) + " host slot " + std::to_string(slot) +
                       ", which no tree node holds",
                   src.node);
        break;
      }
      if (pinned.count(holder) == 0) {
        report.add("inflight.load_sources",
                   "load of node " + std::to_string(src.node) + " reads the " +
                       std::string(to_string(src.pool)) + " host copy of node " +
                       std::to_string(holder->id) +
                       ", which nothing pins (no host protection or lock on it or below)",
                   holder->id);
        break;
      }
    }
  }
}

// [storage.hash_chain] A node's page hashes name its pages in storage: a stale or wrong chain
// backs pages up under another prefix's key (or loads another prefix's KV). Recomputed from the
// namespace seed and the node's tokens by the plain reference encoder above (not hash_pages:
// a wrong encoder would agree with itself), chained from the parent's recomputed last digest.
void HiCache::check_hash_chains(SanityReport& report,
                                std::optional<std::pair<uint64_t, uint64_t>> slice) const {
  std::map<NodeId, PageDigest> last;  // recomputed last digest per node, parents first
  auto chain_end = [&](const TreeNode& n, auto& self) -> PageDigest {
    if (n.is_root()) return reference_namespace_seed(n.ns);
    if (const auto it = last.find(n.id); it != last.end()) return it->second;
    // A sliced check starts from the parent's cached last digest (the parent's own chain is
    // recomputed in its slice); a parent without cached hashes is recomputed.
    const bool parent_cached = slice && !n.parent->is_root() && !n.parent->hash_value.empty();
    const PageDigest prev = n.parent->is_root() ? reference_namespace_seed(n.ns)
                            : parent_cached     ? n.parent->hash_value.back()
                                                : self(*n.parent, self);
    const std::vector<PageDigest> pages =
        reference_hash_pages(prev, n.key.span(), static_cast<size_t>(options_.page_size));
    last[n.id] = pages.back();
    if (!n.hash_value.empty() && n.hash_value != pages) {
      report.add("storage.hash_chain", "cached page hashes differ from their recomputation", n.id);
    }
    return pages.back();
  };
  tree_->for_each_node([&](const TreeNode& n) {
    if (n.is_root()) return;
    // [storage.hash_complete] With a storage tier every node holds its page hashes: insert
    // computes them along the inserted path, a prefetch's host insert hands its leaf the keys it
    // read, a split divides the node's hashes between its halves (and the node always had them),
    // load-back and eviction make no node. Only the root has none; without a store, none do.
    if (n.hash_value.empty()) {
      if (storage_ != nullptr) {
        report.add("storage.hash_complete",
                   "a node of a cache with a storage tier holds no page hashes", n.id);
      }
      return;
    }
    if (slice && static_cast<uint64_t>(n.id) % slice->second != slice->first) return;
    chain_end(n, chain_end);
  });
}

void HiCache::check_quiescent(SanityReport& report) const {
  sanity_check(report);
  if (request_slots_->held_pages() != 0) {
    report.add("slots.held_at_quiescence",
               std::to_string(request_slots_->held_pages()) +
                   " device page(s) still held by a request with none live");
  }
  for (const auto& pool : side_) {
    if (!pool || pool->request_slots().held_pages() == 0) continue;
    report.add("slots.held_at_quiescence", std::to_string(pool->request_slots().held_pages()) +
                                               " " + std::string(to_string(pool->name())) +
                                               " page(s) still held by a request with none live");
  }
}

void HiCache::tally_over_eviction(int64_t surplus) {
  // SGLang's amounts (write_backup: the node's whole length from host; a load-back: the load's
  // whole length from device) leave a surplus by design: excused only while they are on.
  if (!options_.sglang_eviction_amounts) stats_.over_evicted_tokens += surplus;
}

std::string HiCache::check_finished_prefetch(const PrefetchOp& op, const TreeNode& anchor,
                                             size_t present, size_t inserted) const {
  // The reference: walk the read tokens [0, completed_tokens) down from the anchor. Each node
  // on the way must hold a host copy; the walk may stop early only at a node without one
  // (insert_host refuses to hang a host-only node under it). What the walk covers must equal
  // the present + inserted tokens finish_prefetch accounted (and kept out of the free list).
  const auto usable = static_cast<size_t>(op.completed_tokens);
  const auto page = static_cast<size_t>(options_.page_size);
  const std::span<const Token> read = std::span<const Token>(op.tokens).first(usable);
  const TreeNode* node = &anchor;
  size_t covered = 0;
  bool refused = false;
  while (covered < usable) {
    const std::span<const Token> rest = read.subspan(covered);
    const TreeNode* child = node->children.scan(op.ns, rest.first(page));
    if (child == nullptr) break;
    if (!child->backed_up()) {
      refused = true;
      break;
    }
    const size_t m = std::min(child->key.size(), rest.size());
    size_t n = 0;
    while (n < m && child->key[n] == rest[n])
      ++n;
    covered += n;
    if (n < child->key.size()) break;
    node = child;
  }
  const std::string who = "prefetch of request " + std::to_string(op.rid) + " read " +
                          std::to_string(usable) + " token(s): ";
  if (!refused && covered != usable) {
    return "prefetch.finish_reference: " + who + "only " + std::to_string(covered) +
           " are in the tree under its anchor with a host copy, and no node without one "
           "refused the rest";
  }
  if (present + inserted != covered) {
    return "prefetch.finish_reference: " + who + "it accounted present " + std::to_string(present) +
           " + inserted " + std::to_string(inserted) + ", the tree holds " +
           std::to_string(covered) + " of them under its anchor";
  }
  return "";
}

std::string HiCache::check_write_through_path(const InsertResult& result) const {
  if (!options_.hierarchical || options_.write_policy != WritePolicy::kWriteThrough) return "";
  for (const TreeNode* n = result.last_node; n != nullptr && !n->is_root(); n = n->parent) {
    if (!n->evicted() && !n->backed_up() && !n->backup_tried && !write_pending(n->id)) {
      return "write-through: node " + std::to_string(n->id) + " of a finished insert's path (" +
             std::to_string(n->token_count()) + " tokens, hit count " +
             std::to_string(n->hit_count) + ") is on device with no host copy and no backup tried";
    }
  }
  return "";
}

std::string HiCache::check_path_swa_slots(TreeNode& node, const IndexVector& slots) const {
  size_t at = 0;
  for (const TreeNode* n : RadixTree::path_to(node)) {
    const ComponentData& d = n->component(ComponentType::kSwa);
    for (size_t i = 0; i < n->key.size(); ++i, ++at) {
      const SlotIndex want = d.value ? (*d.value)[i] : 0;
      if (at >= slots.size() || slots[at] != want) {
        return "path SWA slots of node " + std::to_string(node.id) + ": position " +
               std::to_string(at) + " holds " +
               (at < slots.size() ? std::to_string(slots[at]) : std::string("nothing")) +
               ", node " + std::to_string(n->id) + "'s SWA " +
               (d.value ? "slot is " + std::to_string(want) : std::string("is a tombstone (0)"));
      }
    }
  }
  if (at != slots.size()) return "path SWA slots run past the path's tokens";
  return "";
}

// What each storage call saw before it ran (its result's check compares against it).
HiCache::StorageStepBefore HiCache::check_backup_step_before() const {
  StorageStepBefore before{
      .stats = stats_, .backups = backups_.size(), .finished = finished_backups_.size()};
  if (!backups_.empty()) {
    before.node = backups_.front().node;
    before.pages_done = backups_.front().pages_done;
    before.pages = backups_.front().hashes.size();
  }
  return before;
}

HiCache::StorageStepBefore HiCache::check_prefetch_start_before(RequestId rid,
                                                                const TreeNode& anchor) const {
  StorageStepBefore before{.prefetches = prefetches_.size(),
                           .had_prefetch = prefetches_.count(rid) != 0,
                           .occupied = prefetch_tokens_occupied_,
                           .host_locks = anchor.full().host_lock_ref};
  return before;
}

HiCache::StorageStepBefore HiCache::check_query_step_before() const {
  StorageStepBefore before{.stats = stats_};
  for (const auto& [rid, op] : prefetches_) {
    if (op.state != PrefetchOp::State::kQuery) continue;
    if (before.prefetches++ == 0) before.rid = rid;  // the oldest querying prefetch is next
  }
  return before;
}

HiCache::StorageStepBefore HiCache::check_io_step_before() const {
  StorageStepBefore before{.stats = stats_};
  for (const auto& [rid, op] : prefetches_) {
    if (op.state == PrefetchOp::State::kTransfer && !op.terminated &&
        op.completed_tokens != op.hit_tokens) {
      before.prefetches = 1;  // the oldest such prefetch reads next
      before.rid = rid;
      before.pages_done = static_cast<size_t>(op.completed_tokens);
      break;
    }
  }
  return before;
}

}  // namespace kvsim
