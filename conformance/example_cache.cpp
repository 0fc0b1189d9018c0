#include "conformance/example_cache.h"

#include <algorithm>

#include "core/common/assert.h"
#include "sim/model/content_oracle.h"

namespace kvsim::conformance {
namespace {

// Counts owners per slot of one allocator; reports slots with two owners, owners of free
// slots, and allocated slots nobody owns.
class Owners {
 public:
  Owners(const PagedSlotAllocator& slots, std::string pool)
      : slots_(slots), pool_(std::move(pool)), count_(static_cast<size_t>(slots.slot_count()), 0) {}
  void own(const IndexVector& v, NodeId node, SanityReport& report) {
    for (SlotIndex s : v.slots()) {
      if (s <= 0 || static_cast<size_t>(s) >= count_.size()) {
        report.add("example.ownership", pool_ + " slot out of range", node, s);
        continue;
      }
      if (++count_[static_cast<size_t>(s)] == 2) {
        report.add("example.ownership", pool_ + " slot has two owners", node, s);
      }
      if (!slots_.is_allocated(s))
        report.add("example.ownership", pool_ + " free slot owned", node, s);
    }
  }
  void check_unowned(SanityReport& report) const {
    for (size_t s = static_cast<size_t>(slots_.page_size()); s < count_.size(); ++s) {
      if (count_[s] == 0 && slots_.is_allocated(static_cast<SlotIndex>(s))) {
        report.add("example.ownership", pool_ + " slot allocated but not owned (leak)",
                   std::nullopt, static_cast<SlotIndex>(s));
      }
    }
  }

 private:
  const PagedSlotAllocator& slots_;
  std::string pool_;
  std::vector<uint8_t> count_;
};

}  // namespace

uint64_t token_tag(Namespace ns, std::span<const Token> tokens, size_t position) {
  KV_ASSERT(position < tokens.size(), "tag past the end of the tokens");
  sim::PrefixHash h(ns);
  for (size_t i = 0; i <= position; ++i)
    h.add(tokens[i]);
  return h.value();
}

ExampleCache::ExampleCache(ExampleCacheOptions options)
    : options_(options),
      tree_(RadixTreeOptions{.page_size = options.page_size}),
      device_slots_(Tier::kDevice, options.device_tokens, options.page_size),
      host_slots_(Tier::kHost, options.host_tokens, options.page_size),
      device_tags_(static_cast<size_t>(options.device_tokens + options.page_size), 0),
      host_tags_(static_cast<size_t>(options.host_tokens + options.page_size), 0),
      checksums_(options.checksum_device_slots, options.checksum_host_slots) {
  auto component = std::make_unique<PageChecksumComponent>(options.page_size, options.slot);
  component_ = component.get();
  tree_.add_component(std::move(component));
}

void ExampleCache::serve(Namespace ns, std::span<const Token> tokens) {
  const auto page = static_cast<size_t>(options_.page_size);
  const size_t aligned = tokens.size() / page * page;
  MatchResult m = tree_.match_prefix(ns, tokens);
  const LockRecord lock = tree_.lock(*m.last_device_node);
  const size_t cached = m.device_indices.size();
  if (aligned > cached) {
    const auto need = static_cast<int64_t>(aligned - cached);
    if (device_slots_.available_size() < need) evict(need - device_slots_.available_size());
    std::optional<IndexVector> fresh = device_slots_.alloc(need);
    if (fresh) {
      for (size_t i = 0; i < fresh->size(); ++i) {  // the "forward"
        device_tags_.at(static_cast<size_t>((*fresh)[i])) = token_tag(ns, tokens, cached + i);
      }
      IndexVector value = m.device_indices;
      value.append(*fresh);
      const InsertResult ins = tree_.insert(ns, tokens.first(aligned), value);
      // Pages the tree already had on device (past the match: their checksums were gone).
      if (static_cast<size_t>(ins.prefix_len) > cached) {
        device_slots_.free(value.slice(cached, static_cast<size_t>(ins.prefix_len)));
      }
      give_checksums(ns, tokens, *ins.last_node, cached);
    }
  }
  tree_.unlock(lock);
}

void ExampleCache::give_checksums(Namespace ns, std::span<const Token> tokens, TreeNode& last,
                                  size_t from) {
  // Every node the request computed that lacks device checksums gets them (a revived
  // tombstone or a new node). The path is locked so that making room cannot evict it.
  const LockRecord hold = tree_.lock(last);
  std::vector<TreeNode*> targets;
  size_t start = 0;
  int64_t need = 0;
  for (TreeNode* n : RadixTree::path_to(last)) {
    if (start >= from && !n->has_device(options_.slot)) {
      targets.push_back(n);
      need += static_cast<int64_t>(component_->slots_for(*n));
    }
    start += n->key.size();
  }
  const auto page = static_cast<size_t>(options_.page_size);
  PagedSlotAllocator& pool = checksums_.device_slots();
  if (need > 0 && pool.available_size() < need) evict_checksums(need - pool.available_size());
  std::optional<IndexVector> slots = need > 0 ? pool.alloc(need) : std::nullopt;
  if (slots) {
    size_t at = 0;
    start = 0;
    for (TreeNode* n : RadixTree::path_to(last)) {
      const size_t len = n->key.size();
      if (std::find(targets.begin(), targets.end(), n) != targets.end()) {
        const size_t k = component_->slots_for(*n);
        IndexVector mine = slots->slice(at, at + k);
        for (size_t p = 0; p < k; ++p) {
          checksums_.device(mine[p]) = page_checksum(ns, tokens, start + (p + 1) * page);
        }
        tree_.set_aux_value(*n, options_.slot, std::move(mine));
        at += k;
      }
      start += len;
    }
  }
  tree_.unlock(hold);
}

int64_t ExampleCache::backup(TreeNode& node) {
  KV_ASSERT(!node.is_root() && !node.evicted() && !node.backed_up(), "nothing to back up");
  if (!node.parent->is_root() && !node.parent->backed_up()) return 0;  // root-closed backups
  const int64_t need = node.token_count();
  if (host_slots_.available_size() < need) evict_host(need - host_slots_.available_size());
  std::optional<IndexVector> host = host_slots_.alloc(need);
  if (!host) return 0;
  for (size_t i = 0; i < host->size(); ++i) {
    host_tags_.at(static_cast<size_t>((*host)[i])) =
        device_tags_.at(static_cast<size_t>((*node.full().value)[i]));
  }
  tree_.set_host_value(node, std::move(*host));
  const ComponentData& d = node.component(options_.slot);
  if (d.value && !d.host_value) {
    const auto k = static_cast<int64_t>(d.value->size());
    PagedSlotAllocator& pool = checksums_.host_slots();
    if (pool.available_size() < k) evict_host(node.token_count());  // leaves carry checksums
    if (std::optional<IndexVector> ck = pool.alloc(k)) {
      for (size_t p = 0; p < ck->size(); ++p)
        checksums_.host((*ck)[p]) = checksums_.device((*d.value)[p]);
      tree_.set_aux_host_value(node, options_.slot, std::move(*ck));
    }
  }
  return need;
}

int64_t ExampleCache::evict(int64_t tokens) {
  int64_t freed = 0;
  while (freed < tokens) {
    TreeNode* victim = tree_.next_device_victim();
    if (victim == nullptr) break;
    freed += victim->token_count();
    evict_device_victim(*victim);
  }
  return freed;
}

void ExampleCache::evict_device_victim(TreeNode& victim) {
  free_released(victim.backed_up() ? tree_.demote(victim) : tree_.remove_device_leaf(victim));
}

int64_t ExampleCache::evict_checksums(int64_t slots) {
  int64_t freed = 0;
  while (freed < slots) {
    TreeNode* victim = tree_.next_aux_victim(options_.slot);
    if (victim == nullptr) break;
    freed += static_cast<int64_t>(victim->component(options_.slot).value->size());
    if (victim->device_leaf_key.has_value()) {
      evict_device_victim(*victim);  // a device leaf without its checksums is worth nothing
    } else {
      checksums_.device_slots().free(tree_.take_aux_value(*victim, options_.slot));
    }
  }
  return freed;
}

int64_t ExampleCache::evict_host(int64_t tokens) {
  int64_t freed = 0;
  while (freed < tokens) {
    TreeNode* victim = tree_.next_host_victim();
    if (victim == nullptr) break;
    freed += victim->token_count();
    free_released(tree_.remove_host_leaf(*victim));
  }
  return freed;
}

void ExampleCache::free_released(const ReleasedSlots& released) {
  if (released.device[0]) device_slots_.free(*released.device[0]);
  if (released.host[0]) host_slots_.free(*released.host[0]);
  const size_t t = index_of(options_.slot);
  if (released.device[t]) checksums_.device_slots().free(*released.device[t]);
  if (released.host[t]) checksums_.host_slots().free(*released.host[t]);
}

bool ExampleCache::load_back(TreeNode& best_match_node) {
  std::vector<TreeNode*> chain;
  TreeNode* ancestor = &best_match_node;
  while (!ancestor->is_root() && ancestor->evicted()) {
    KV_ASSERT(ancestor->backed_up(), "example load-back walked into a node with no copy");
    chain.push_back(ancestor);
    ancestor = ancestor->parent;
  }
  std::reverse(chain.begin(), chain.end());
  const bool need_checksums =
      !best_match_node.is_root() && !best_match_node.has_device(options_.slot);
  if (need_checksums) {
    KV_ASSERT(best_match_node.has_host(options_.slot),
              "example load-back anchored on node " + std::to_string(best_match_node.id) +
                  " with neither device nor host checksums");
  }
  if (chain.empty() && !need_checksums) return false;

  // Keep the device ancestors while room is made; nothing is host-evicted here.
  const LockRecord keep = tree_.lock(*ancestor);
  IndexVector host(Tier::kHost, {});
  for (TreeNode* n : chain)
    host.append(*n->full().host_value);
  const auto tokens = static_cast<int64_t>(host.size());
  std::optional<IndexVector> device = IndexVector(Tier::kDevice, {});
  if (tokens > 0) {
    if (device_slots_.available_size() < tokens) evict(tokens - device_slots_.available_size());
    device = device_slots_.alloc(tokens);
  }
  std::optional<IndexVector> checksum_slots = IndexVector(Tier::kDevice, {});
  if (device && need_checksums) {
    const auto k = static_cast<int64_t>(component_->slots_for(best_match_node));
    PagedSlotAllocator& pool = checksums_.device_slots();
    if (pool.available_size() < k) evict_checksums(k - pool.available_size());
    checksum_slots = pool.alloc(k);
  }
  tree_.unlock(keep);
  if (!device || !checksum_slots) {  // roll back
    if (device && !device->empty()) device_slots_.free(*device);
    return false;
  }
  size_t at = 0;
  for (TreeNode* n : chain) {
    const size_t len = n->key.size();
    for (size_t i = 0; i < len; ++i) {
      device_tags_.at(static_cast<size_t>((*device)[at + i])) =
          host_tags_.at(static_cast<size_t>((*n->full().host_value)[i]));
    }
    tree_.set_device_value(*n, device->slice(at, at + len));
    at += len;
  }
  if (need_checksums) {
    const IndexVector& from = *best_match_node.component(options_.slot).host_value;
    for (size_t p = 0; p < from.size(); ++p)
      checksums_.device((*checksum_slots)[p]) = checksums_.host(from[p]);
    tree_.set_aux_value(best_match_node, options_.slot, std::move(*checksum_slots));
  }
  return true;
}

void ExampleCache::sanity_check(SanityReport& report) const {
  tree_.sanity_check(report);
  for (const auto* a :
       {&device_slots_, &host_slots_, &checksums_.device_slots(), &checksums_.host_slots()}) {
    const std::string problem = a->check();
    if (!problem.empty()) report.add("example.allocator", problem);
  }
  Owners device(device_slots_, "device");
  Owners host(host_slots_, "host");
  Owners ck_device(checksums_.device_slots(), "checksum device");
  Owners ck_host(checksums_.host_slots(), "checksum host");
  tree_.for_each_node([&](const TreeNode& n) {
    if (n.is_root()) return;
    if (n.full().value) device.own(*n.full().value, n.id, report);
    if (n.full().host_value) host.own(*n.full().host_value, n.id, report);
    const ComponentData& d = n.component(options_.slot);
    if (d.value) ck_device.own(*d.value, n.id, report);
    if (d.host_value) ck_host.own(*d.host_value, n.id, report);
  });
  device.check_unowned(report);
  host.check_unowned(report);
  ck_device.check_unowned(report);
  ck_host.check_unowned(report);
}

std::optional<std::string> ExampleCache::values_error(const TreeNode& node, ComponentType type) {
  if (node.is_root()) return std::nullopt;
  const std::vector<Token> prefix = RadixTree::prefix_tokens(node);
  const size_t begin = prefix.size() - node.key.size();
  const std::string where = "node " + std::to_string(node.id);
  if (type == ComponentType::kFull) {
    for (int tier = 0; tier < 2; ++tier) {
      const auto& v = tier == 0 ? node.full().value : node.full().host_value;
      const auto& tags = tier == 0 ? device_tags_ : host_tags_;
      if (!v) continue;
      for (size_t i = 0; i < v->size(); ++i) {
        if (tags.at(static_cast<size_t>((*v)[i])) != token_tag(node.ns, prefix, begin + i)) {
          return where + (tier == 0 ? " device" : " host") + " tag at position " +
                 std::to_string(begin + i);
        }
      }
    }
    return std::nullopt;
  }
  KV_ASSERT(type == options_.slot, "ExampleCache hosts only the full and checksum components");
  const ComponentData& d = node.component(type);
  const size_t page = static_cast<size_t>(options_.page_size);
  for (int tier = 0; tier < 2; ++tier) {
    const auto& v = tier == 0 ? d.value : d.host_value;
    if (!v) continue;
    for (size_t p = 0; p < v->size(); ++p) {
      const uint64_t got = tier == 0 ? checksums_.device((*v)[p]) : checksums_.host((*v)[p]);
      if (got != page_checksum(node.ns, prefix, begin + (p + 1) * page)) {
        return where + (tier == 0 ? " device" : " host") + " checksum of page " + std::to_string(p);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> ExampleCache::leak_error() const {
  if (device_slots_.available_size() != device_slots_.capacity()) return "device slots leaked";
  if (host_slots_.available_size() != host_slots_.capacity()) return "host slots leaked";
  if (checksums_.device_slots().available_size() != checksums_.device_slots().capacity())
    return "checksum device slots leaked";
  if (checksums_.host_slots().available_size() != checksums_.host_slots().capacity())
    return "checksum host slots leaked";
  return std::nullopt;
}

}  // namespace kvsim::conformance
