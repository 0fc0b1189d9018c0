// KvsimCoreCache: the checks — after every op (and the full walks: the core's, the metadata
// slots', the caching allocator's), the host copies a prefetch filled, and quiescence at the
// end of a run. The model's reads are core_cache_reads.cpp.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "sim/model/content_oracle.h"
#include "sim/model/core_cache.h"

namespace kvsim::sim {

namespace {

// "detail (node N, slot S)" of a core violation.
std::string describe_violation(const Violation& v) {
  std::string s = v.detail;
  if (v.node) s += " (node " + std::to_string(*v.node) + ")";
  if (v.slot) s += " (slot " + std::to_string(*v.slot) + ")";
  return s;
}

}  // namespace

void KvsimCoreCache::check_after_op(bool may_change_cache) {
  if (!backend_.violations().empty()) {
    const BackendViolation& v = backend_.violations().front();
    fail("stream_lifetime", v.kind + ": " + v.detail);
    return;
  }
  if (storage_) {
    if (storage_->faults().contract_broken()) {
      fail("storage.contract", *storage_->faults().contract_broken());
      return;
    }
    if (const auto wrong = storage_->faults().budget_order_broken()) {
      fail("storage.budget_order", *wrong);
      return;
    }
    if (const std::string wrong = storage_stats_disagree(); !wrong.empty()) {
      fail("storage.stats", wrong);
      return;
    }
  }
  const HiCache& cache = *cache_;
  ctx_.stats.max_tree_nodes =
      std::max(ctx_.stats.max_tree_nodes, static_cast<int64_t>(cache.tree().node_count()));
  const int64_t allocated = cache.options().device_tokens - cache.available_device_size();
  const int64_t accounted =
      cache.tree().evictable_size() + cache.tree().protected_size() + cache.request_held_tokens();
  if (allocated != accounted) {
    fail("slots.conservation", "device pool: " + std::to_string(allocated) +
                                   " tokens allocated but tree + requests account for " +
                                   std::to_string(accounted));
    return;
  }
  // Auto: the walk visits every node and every page, so run it once per (nodes + pages) / 8
  // ops that may change the cache — a constant amortized cost per state change, whatever the
  // size of the tree. An explicit full_every counts every applied op.
  const bool automatic = scenario_.check.full_every <= 0;
  if (automatic && !may_change_cache) return;
  const int64_t walk_cost = static_cast<int64_t>(cache.tree().node_count()) +
                            cache.options().device_tokens / cache.options().page_size +
                            cache.options().host_tokens / cache.options().page_size;
  const int64_t every =
      automatic ? std::max<int64_t>(1, walk_cost / 8) : scenario_.check.full_every;
  if (++since_full_check_ < every) return;
  since_full_check_ = 0;
  ++ctx_.stats.full_checks;
  SanityReport report;
  ScopedThrowingAsserts asserts;
  try {
    // The storage page hashes are recomputed a slice per check (HiCache::sanity_check_sliced):
    // SHA-256 over every backed-up token made each full check 4x as costly.
    cache_->sanity_check_sliced(report, static_cast<uint64_t>(ctx_.stats.full_checks));
  } catch (const AssertionFailure& e) {
    fail("core.assert", e.what());
    return;
  }
  if (!report.ok()) {
    const Violation& v = *report.first();
    fail(v.invariant, describe_violation(v));
    return;
  }
  check_side_structures();
}

// After the core's own walk (so a core violation is still the one reported): PD's metadata
// slots ("metadata.free_list", "metadata.stale_field") and the CPU backend's caching allocator
// ("backend.allocator"), then the backend's complete account (backend.memory_owned). All only
// read; O(slots) and O(physical blocks).
void KvsimCoreCache::check_side_structures() {
  if (metadata_) {
    SanityReport report;
    metadata_->sanity_check(report);
    if (!report.ok()) {
      fail(report.first()->invariant, describe_violation(*report.first()));
      return;
    }
  }
  if (const std::string wrong = backend_.allocator().check(); !wrong.empty()) {
    fail("backend.allocator", "CachingAllocator::check: " + wrong);
    return;
  }
  // The complete account: with the simulator's own blocks named, a live block the cache
  // cannot name is owned by no one (backend.memory_owned).
  const std::vector<Block> outside{sparse_ ? sparse_->block() : Block{}, scratch_};
  if (const std::string wrong = cache_->controller().memory_problem(outside); !wrong.empty())
    fail("backend.memory_owned", wrong);
}

bool KvsimCoreCache::check_prefetched_host(const SimRequest& r) {
  const HostKVPool& host = cache_->host_pool();
  const auto page = static_cast<size_t>(scenario_.cache.page_size);
  const std::span<const Token> tokens(r.tokens);
  std::vector<std::byte> expected(host.item_bytes());
  const TreeNode* node = cache_->tree().root();
  size_t pos = 0;
  // A read-only walk (match_prefix would refresh access times): whole pages, as the tree
  // holds them.
  while (pos + page <= tokens.size()) {
    const TreeNode* child = node->children.scan(r.ns, tokens.subspan(pos, page));
    if (child == nullptr) break;
    size_t k = 0;
    while (k < child->key.size() && pos + k < tokens.size() && child->key[k] == tokens[pos + k])
      ++k;
    const std::optional<IndexVector>& value = child->full().host_value;
    if (value && !cache_->write_pending(child->id)) {
      for (size_t i = 0; i < k; ++i) {
        for (int32_t layer = 0; layer < host.layer_count(); ++layer) {
          fill_item(r.prefix_hash[pos + i], pos + i, layer, ContentKind::kFull, expected);
          const std::vector<std::byte> got = host.read_item(layer, (*value)[i]);
          if (got != expected) {
            fail("content", "host KV after prefetch: request " + std::to_string(r.rid) +
                                " position " + std::to_string(pos + i) + " layer " +
                                std::to_string(layer) + " (host slot " +
                                std::to_string((*value)[i]) + ", node " +
                                std::to_string(child->id) + ") holds bytes of another prefix");
            return false;
          }
        }
      }
    }
    if (k < child->key.size()) break;
    pos += k;
    node = child;
  }
  return true;
}

void KvsimCoreCache::check_quiescent() {
  auto quiet = [&](bool ok, const std::string& what) {
    if (!ok) fail("quiescence", what);
  };
  const RadixTree& tree = cache_->tree();
  quiet(tree.protected_size() == 0,
        "tree still protects " + std::to_string(tree.protected_size()) + " tokens");
  for (ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
    quiet(tree.aux_protected_size(t) == 0, std::string(to_string(t)) + " values still locked: " +
                                               std::to_string(tree.aux_protected_size(t)));
  }
  quiet(cache_->controller().pending_writes() == 0 && cache_->controller().pending_loads() == 0,
        "transfers still pending");
  quiet(cache_->prefetches().empty(), "prefetches still live");
  quiet(backend_.pending_ops() == 0, "backend ops still queued");
  // Every host protection was given back (host_protection.owned checks the owners as it goes).
  tree.for_each_node([&](const TreeNode& n) {
    quiet(n.full().host_lock_ref == 0, "node " + std::to_string(n.id) + " still host-protected (" +
                                           std::to_string(n.full().host_lock_ref) + ")");
  });
  // The full walk, and no page of any pool still held by a request (none is live).
  SanityReport report;
  cache_->check_quiescent(report);
  if (!report.ok()) {
    fail(report.first()->invariant, describe_violation(*report.first()));
  } else {
    check_side_structures();
  }
  if (metadata_) {
    quiet(metadata_->available_size() == metadata_->slot_count(),
          "metadata slots still held: " +
              std::to_string(metadata_->slot_count() - metadata_->available_size()));
  }
}

// The cache's storage statistics against what the store answered it (FaultyStorage counts):
// "" when they agree. A page read back short counts as corrupt in the cache.
std::string KvsimCoreCache::storage_stats_disagree() const {
  const StorageCallCounts& c = storage_->faults().calls();
  const HiCacheStats& s = cache_->stats();
  const struct {
    const char* stat;
    int64_t cache;
    uint64_t store;
  } pairs[] = {
      {"backed_up_pages (sets answered ok)", s.backed_up_pages, c.set_ok},
      {"storage_write_failures (sets that failed)", s.storage_write_failures, c.set_failed},
      {"storage_hit_pages (gets answered ok, whole)", s.storage_hit_pages, c.get_ok},
      {"storage_miss_pages (gets answered miss)", s.storage_miss_pages, c.get_miss},
      {"storage_read_errors (gets answered io_error)", s.storage_read_errors, c.get_io_error},
      {"storage_corrupt_pages (gets answered corrupt or short)", s.storage_corrupt_pages,
       c.get_corrupt + c.get_short},
  };
  for (const auto& p : pairs) {
    if (p.cache != static_cast<int64_t>(p.store)) {
      return std::string(p.stat) + ": the cache counts " + std::to_string(p.cache) +
             ", the store answered " + std::to_string(p.store);
    }
  }
  return "";
}

StorageRunStats KvsimCoreCache::storage_stats() const {
  return storage_ ? storage_->summary(cache_->stats()) : StorageRunStats{};
}

}  // namespace kvsim::sim
