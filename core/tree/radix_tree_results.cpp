// RadixTree: checks of the results its public operations return (see radix_tree_results.h).
#include <algorithm>
#include <string>
#include <vector>

#include "core/tree/mamba_component.h"
#include "core/tree/radix_tree_results.h"
#include "core/tree/swa_component.h"

namespace kvsim {
namespace {

std::string id_of(const TreeNode* n) {
  return n == nullptr ? "null" : std::to_string(n->id);
}

int64_t size_of(const std::optional<IndexVector>& v) {
  return v ? static_cast<int64_t>(v->size()) : -1;
}

// Slots of a value as first/last (a cheap fingerprint of which slots a vector holds).
bool same_ends(const IndexVector& v, const NodeSlotsBefore::Value& b) {
  return static_cast<int64_t>(v.size()) == b.size &&
         (v.empty() || (v[0] == b.first && v[v.size() - 1] == b.last));
}

int64_t aux_evictable_of(const RadixTree& tree, size_t t) {
  return tree.aux_evictable_size(static_cast<ComponentType>(t));
}

int64_t aux_protected_of(const RadixTree& tree, size_t t) {
  return tree.aux_protected_size(static_cast<ComponentType>(t));
}

// The side components whose rules these checks recompute are kvsim's own SWA and Mamba. A
// third-party component may sit in a side slot (the conformance kit's example component takes
// kMamba's) with rules of its own: its slot is left to its conformance kit, not judged by
// SWA's or Mamba's rules here.
struct SideRules {
  bool swa_known = true;    // kSwa is empty or holds SwaComponent
  bool mamba_known = true;  // kMamba is empty or holds MambaComponent
  int64_t window = 0;       // SwaComponent's window (0: none)
  bool mamba = false;       // MambaComponent present
  bool known(size_t t) const {
    return t == index_of(ComponentType::kSwa)     ? swa_known
           : t == index_of(ComponentType::kMamba) ? mamba_known
                                                  : true;
  }
};

SideRules side_rules(const RadixTree& tree) {
  SideRules r;
  for (const auto& c : tree.components()) {
    if (c->type() == ComponentType::kSwa) {
      const auto* swa = dynamic_cast<const SwaComponent*>(c.get());
      r.swa_known = swa != nullptr;
      r.window = swa != nullptr ? swa->window() : 0;
    } else if (c->type() == ComponentType::kMamba) {
      r.mamba = dynamic_cast<const MambaComponent*>(c.get()) != nullptr;
      r.mamba_known = r.mamba;
    }
  }
  return r;
}

}  // namespace

TreeResultBaseline check_baseline(const RadixTree& tree, uint64_t clock) {
  TreeResultBaseline b;
  b.device_tokens = tree.evictable_size() + tree.protected_size();
  b.protected_tokens = tree.protected_size();
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    b.aux_evictable[t] = tree.aux_evictable_size(static_cast<ComponentType>(t));
    b.aux_protected[t] = tree.aux_protected_size(static_cast<ComponentType>(t));
  }
  b.clock = clock;
  b.nodes = tree.node_count();
  return b;
}

NodeSlotsBefore check_node_slots(const RadixTree& tree, const TreeNode& node) {
  NodeSlotsBefore s;
  s.id = node.id;
  s.base = check_baseline(tree, 0);
  for (size_t t = 0; t < kComponentTypesMax; ++t) {
    const ComponentData& d = node.component(t);
    for (int side = 0; side < 2; ++side) {
      const std::optional<IndexVector>& v = side == 0 ? d.value : d.host_value;
      NodeSlotsBefore::Value& out = side == 0 ? s.device[t] : s.host[t];
      if (!v) continue;
      out.size = static_cast<int64_t>(v->size());
      if (!v->empty()) {
        out.first = (*v)[0];
        out.last = (*v)[v->size() - 1];
      }
    }
  }
  return s;
}

// The verdicts of a matched path, recomputed node by node from each component's data (not
// through the components' validators): [i] = {device, host} for the prefix ending at path[i].
static std::vector<std::pair<bool, bool>> check_reference_verdicts(
    const RadixTree& tree, const std::vector<const TreeNode*>& path) {
  const SideRules rules = side_rules(tree);
  const int64_t window = rules.window;
  const bool mamba = rules.mamba;
  std::vector<std::pair<bool, bool>> out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const TreeNode& n = *path[i];
    bool device = !n.evicted();
    bool host = device || n.backed_up();
    if (mamba) {
      device = device && n.has_device(ComponentType::kMamba);
      host = host && (n.has_device(ComponentType::kMamba) || n.has_host(ComponentType::kMamba));
    }
    if (window > 0) {
      // Walk up from path[i]: the last `window` tokens (or all, when fewer) need SWA data.
      bool dev_ok = true;
      bool host_ok = true;
      int64_t dev_run = 0;
      int64_t host_run = 0;
      for (size_t j = i + 1; j-- > 0;) {
        const TreeNode& m = *path[j];
        const bool d = m.has_device(ComponentType::kSwa);
        const bool h = d || m.has_host(ComponentType::kSwa);
        if (dev_ok && dev_run < window) {
          if (d) {
            dev_run += m.token_count();
          } else {
            dev_ok = false;
          }
        }
        if (host_ok && host_run < window) {
          if (h) {
            host_run += m.token_count();
          } else {
            host_ok = false;
          }
        }
        if ((!dev_ok || dev_run >= window) && (!host_ok || host_run >= window)) break;
      }
      device = device && dev_ok;
      host = host && host_ok;
    }
    out.emplace_back(device, host);
  }
  return out;
}

// The nodes root->end, read through parent links (not RadixTree::path_to: the check stays
// independent of the walks it checks), into `path`; `pos` ends as the tokens they hold. "" when
// they spell tokens[0, pos) in `ns` within the first `aligned` tokens (and, with `on_device`,
// none is evicted); otherwise the first node that does not.
template <typename T>
static std::string check_path_spells(const TreeNode* end, Namespace ns, std::span<const T> tokens,
                                     size_t aligned, bool on_device,
                                     std::vector<const TreeNode*>& path, size_t& pos) {
  for (const TreeNode* n = end; !n->is_root(); n = n->parent)
    path.push_back(n);
  std::reverse(path.begin(), path.end());
  pos = 0;
  for (const TreeNode* n : path) {
    if (n->ns != ns || pos + n->key.size() > aligned || (on_device && n->evicted())) {
      return "node " + id_of(n) +
             (on_device ? " of the last node's path is off the key or evicted"
                        : " lies outside the query");
    }
    for (size_t j = 0; j < n->key.size(); ++j) {
      if (static_cast<int64_t>(n->key[j]) != static_cast<int64_t>(tokens[pos + j])) {
        return "node " + id_of(n) + " differs from the " + (on_device ? "key" : "query") +
               " at token " + std::to_string(pos + j);
      }
    }
    pos += n->key.size();
  }
  return "";
}

template <typename T>
std::string check_match_result(const RadixTree& tree, const TreeNode& walk_end, Namespace ns,
                               std::span<const T> tokens, const MatchResult& r) {
  const std::string where = "tree.match_result: ";
  const auto page = static_cast<size_t>(tree.page_size());
  const size_t aligned = tokens.size() / page * page;
  // The matched path, read up from its end through parent links: it must spell the tokens.
  const TreeNode* end = &walk_end;
  std::vector<const TreeNode*> path;
  size_t pos = 0;
  if (std::string broken = check_path_spells(end, ns, tokens, aligned, false, path, pos);
      !broken.empty()) {
    return where + broken;
  }
  // The match is the longest: no child of its end starts with the next page of the query.
  if (pos < aligned) {
    for (const auto& e : end->children) {
      const TreeNode& c = *e.node;
      if (c.ns != ns) continue;
      bool same = true;
      for (size_t j = 0; j < page && same; ++j)
        same = static_cast<int64_t>(c.key[j]) == static_cast<int64_t>(tokens[pos + j]);
      if (same) {
        return where + "the match stops at " + std::to_string(pos) + " tokens, but child " +
               id_of(&c) + " of node " + id_of(end) + " continues it";
      }
    }
  }
  // The result's nodes: the deepest of the path that each rule accepts (the root if none).
  // A third-party side component's rules are its own (SideRules): then the result's device and
  // best nodes are taken as given, and only what follows from them is checked.
  const std::vector<std::pair<bool, bool>> verdicts = check_reference_verdicts(tree, path);
  const SideRules rules = side_rules(tree);
  const bool foreign = !rules.swa_known || !rules.mamba_known;
  const TreeNode* want_device = foreign ? r.last_device_node : tree.root();
  const TreeNode* want_best = foreign ? r.best_match_node : tree.root();
  const TreeNode* want_host = tree.root();
  for (size_t i = 0; i < path.size(); ++i) {
    if (!foreign && verdicts[i].first) want_device = path[i];
    if (!foreign && verdicts[i].second) want_best = path[i];
    if (path[i]->backed_up()) want_host = path[i];
  }
  if (want_device == nullptr || want_best == nullptr) return where + "a null result node";
  if (r.last_device_node != want_device || r.best_match_node != want_best ||
      r.last_host_node != want_host) {
    return where + "device/best/host nodes " + id_of(r.last_device_node) + "/" +
           id_of(r.best_match_node) + "/" + id_of(r.last_host_node) + ", recomputed " +
           id_of(want_device) + "/" + id_of(want_best) + "/" + id_of(want_host);
  }
  // device_indices: the device values root→last_device_node; host_hit_length: the tokens
  // from there down to best_match_node.
  std::vector<const TreeNode*> up;
  for (const TreeNode* n = want_device; !n->is_root(); n = n->parent)
    up.push_back(n);
  if (r.device_indices.tier() != Tier::kDevice) return where + "device indices of another tier";
  size_t k = 0;
  for (auto it = up.rbegin(); it != up.rend(); ++it) {
    const IndexVector& v = *(*it)->full().value;
    for (size_t j = 0; j < v.size(); ++j, ++k) {
      if (k >= r.device_indices.size() || r.device_indices[k] != v[j]) {
        return where + "device index " + std::to_string(k) + " differs from node " + id_of(*it) +
               "'s slot";
      }
    }
  }
  if (k != r.device_indices.size()) {
    return where + std::to_string(r.device_indices.size()) + " device indices, the path holds " +
           std::to_string(k);
  }
  int64_t host_hit = 0;
  const TreeNode* n = want_best;
  for (; n != want_device && !n->is_root(); n = n->parent)
    host_hit += n->token_count();
  if (n != want_device || host_hit != r.host_hit_length) {
    return where + "host hit " + std::to_string(r.host_hit_length) + ", recomputed " +
           std::to_string(host_hit);
  }
  return "";
}

template std::string check_match_result<Token>(const RadixTree&, const TreeNode&, Namespace,
                                               std::span<const Token>, const MatchResult&);
template std::string check_match_result<int64_t>(const RadixTree&, const TreeNode&, Namespace,
                                                 std::span<const int64_t>, const MatchResult&);

template <typename T>
std::string check_insert_result(const RadixTree& tree, Namespace ns, std::span<const T> tokens,
                                const AuxInsertValues& aux, const InsertResult& r,
                                const TreeResultBaseline& before) {
  const std::string where = "tree.insert_result: ";
  const auto page = static_cast<size_t>(tree.page_size());
  const size_t aligned = tokens.size() / page * page;
  if (r.last_node == nullptr) return where + "no last node";
  // last_node ends the key: its path spells the tokens, every node of it on device.
  std::vector<const TreeNode*> path;
  size_t pos = 0;
  if (std::string broken = check_path_spells(r.last_node, ns, tokens, aligned, true, path, pos);
      !broken.empty()) {
    return where + broken;
  }
  if (pos != aligned) {
    return where + "the last node " + id_of(r.last_node) + " ends " + std::to_string(pos) +
           " tokens in, the key holds " + std::to_string(aligned);
  }
  // prefix_len: the device tokens the tree gained are the key's, less those it held already.
  const int64_t gained = tree.evictable_size() + tree.protected_size() - before.device_tokens;
  if (r.prefix_len < 0 || gained != static_cast<int64_t>(aligned) - r.prefix_len) {
    return where + "prefix_len " + std::to_string(r.prefix_len) + ", but the tree gained " +
           std::to_string(gained) + " device tokens of a " + std::to_string(aligned) + "-token key";
  }
  // hit_nodes: nodes of the path, root→leaf, holding the prefix and a new leaf (made by this
  // insert: created after it began).
  const bool new_leaf = !r.last_node->is_root() && r.last_node->creation > before.clock;
  int64_t hit_tokens = 0;
  size_t h = 0;
  for (const TreeNode* n : path) {
    if (h < r.hit_nodes.size() && r.hit_nodes[h] == n) {
      hit_tokens += n->token_count();
      ++h;
    }
  }
  const int64_t want_hit = r.prefix_len + (new_leaf ? r.last_node->token_count() : 0);
  if (h != r.hit_nodes.size() || hit_tokens != want_hit ||
      (new_leaf && r.hit_nodes.back() != r.last_node)) {
    return where + std::to_string(r.hit_nodes.size()) + " hit nodes holding " +
           std::to_string(hit_tokens) + " tokens, in path order " + std::to_string(h) + "; want " +
           std::to_string(want_hit) + " tokens" + (new_leaf ? " ending at the leaf" : "");
  }
  if (!aux.chunked) {
    for (const TreeNode* n : r.hit_nodes) {
      if (n->hit_count == 0) return where + "hit node " + id_of(n) + " has hit count 0";
    }
  }
  // Adopted side slots: the side pools' evictable counts grew by exactly them.
  const size_t swa = index_of(ComponentType::kSwa);
  const size_t mamba = index_of(ComponentType::kMamba);
  const SideRules rules = side_rules(tree);
  if (rules.swa_known && aux_evictable_of(tree, swa) - before.aux_evictable[swa] !=
                             static_cast<int64_t>(r.swa_adopted.size())) {
    return where + std::to_string(r.swa_adopted.size()) + " SWA slots adopted, the tree's SWA " +
           "values grew by " +
           std::to_string(aux_evictable_of(tree, swa) - before.aux_evictable[swa]);
  }
  if (rules.swa_known && !r.swa_adopted.empty()) {
    // ... and they are the request's own, in key order.
    size_t a = 0;
    for (size_t i = aux.owned_from; aux.swa && i < aligned && a < r.swa_adopted.size(); ++i) {
      if ((*aux.swa)[i] != 0 && (*aux.swa)[i] == r.swa_adopted[a]) ++a;
    }
    if (a != r.swa_adopted.size()) {
      return where + "adopted SWA slot " + std::to_string(r.swa_adopted[a]) +
             " is not the request's own, in key order";
    }
  }
  if (!rules.mamba_known) return "";
  if (aux_evictable_of(tree, mamba) - before.aux_evictable[mamba] != (r.mamba_adopted ? 1 : 0)) {
    return where + std::string("Mamba ") + (r.mamba_adopted ? "adopted" : "not adopted") +
           ", the tree's Mamba values grew by " +
           std::to_string(aux_evictable_of(tree, mamba) - before.aux_evictable[mamba]);
  }
  if (aux.mamba && !r.last_node->is_root()) {
    const std::optional<IndexVector>& v = r.last_node->component(ComponentType::kMamba).value;
    if (!v || (r.mamba_adopted && (v->size() != 1 || (*v)[0] != *aux.mamba))) {
      return where + "the last node " + id_of(r.last_node) + " lacks the Mamba state";
    }
  }
  return "";
}

template std::string check_insert_result<Token>(const RadixTree&, Namespace, std::span<const Token>,
                                                const AuxInsertValues&, const InsertResult&,
                                                const TreeResultBaseline&);
template std::string check_insert_result<int64_t>(const RadixTree&, Namespace,
                                                  std::span<const int64_t>, const AuxInsertValues&,
                                                  const InsertResult&, const TreeResultBaseline&);

std::string check_lock_result(const RadixTree& tree, const TreeNode* anchor,
                              const LockRecord& record, const TreeResultBaseline& before) {
  const bool locking = anchor != nullptr;
  const std::string where = std::string("tree.lock_result: ") + (locking ? "lock" : "unlock") +
                            " of node " + std::to_string(record.anchor) + ": ";
  const size_t full = index_of(ComponentType::kFull);
  const size_t swa = index_of(ComponentType::kSwa);
  const size_t mamba = index_of(ComponentType::kMamba);
  // The full lock starts at the deepest node on device at or above the anchor.
  if (locking) {
    const TreeNode* top = anchor;
    while (!top->is_root() && top->evicted())
      top = top->parent;
    const bool full_ok =
        top->is_root() ? !record.start[full].has_value() : record.start[full] == top->id;
    if (record.anchor != anchor->id || !full_ok) {
      return where + "its full lock starts at " +
             (record.start[full] ? std::to_string(*record.start[full]) : "nothing") +
             ", the deepest device node is " + id_of(top);
    }
    for (size_t t = 1; t < kComponentTypesMax; ++t) {
      if (!side_rules(tree).known(t)) continue;
      const auto type = static_cast<ComponentType>(t);
      const bool present = std::any_of(tree.components().begin(), tree.components().end(),
                                       [&](const auto& c) { return c->type() == type; });
      const bool held = present && !anchor->is_root() && anchor->has_device(type);
      if (record.start[t].has_value() != held || (held && *record.start[t] != anchor->id)) {
        return where + std::string(to_string(static_cast<ComponentType>(t))) +
               " lock start disagrees with the anchor's value";
      }
    }
  }
  // The protected tokens moved by exactly the nodes whose count crossed zero: on a lock, the
  // nodes now held once; on an unlock, those held no more.
  const int64_t crossing = locking ? 1 : 0;
  int64_t moved = 0;
  if (record.start[full]) {
    const TreeNode* s = tree.find(*record.start[full]);
    if (s == nullptr) return where + "its full start vanished";
    for (const TreeNode* n = s; !n->is_root(); n = n->parent) {
      if (n->full().lock_ref == crossing) moved += n->token_count();
    }
  }
  const int64_t delta = locking ? tree.protected_size() - before.protected_tokens
                                : before.protected_tokens - tree.protected_size();
  if (moved != delta) {
    return where + "protected tokens moved by " + std::to_string(delta) + ", the path's nodes " +
           (locking ? "now locked once" : "now unlocked") + " hold " + std::to_string(moved);
  }
  int64_t swa_moved = 0;
  if (record.start[swa]) {
    const TreeNode* s = tree.find(*record.start[swa]);
    if (s == nullptr) return where + "its SWA start vanished";
    uint64_t covered = 0;
    for (const TreeNode* n = s; covered < record.aux[swa] && !n->is_root(); n = n->parent) {
      const ComponentData& d = n->component(ComponentType::kSwa);
      if (d.lock_ref == crossing && d.value) swa_moved += static_cast<int64_t>(d.value->size());
      covered += static_cast<uint64_t>(n->token_count());
    }
  }
  int64_t mamba_moved = 0;
  if (record.start[mamba]) {
    const TreeNode* s = tree.find(*record.start[mamba]);
    if (s == nullptr) return where + "its Mamba start vanished";
    const ComponentData& d = s->component(ComponentType::kMamba);
    if (d.lock_ref == crossing && d.value) mamba_moved = static_cast<int64_t>(d.value->size());
  }
  const int64_t swa_delta = locking ? aux_protected_of(tree, swa) - before.aux_protected[swa]
                                    : before.aux_protected[swa] - aux_protected_of(tree, swa);
  const int64_t mamba_delta = locking ? aux_protected_of(tree, mamba) - before.aux_protected[mamba]
                                      : before.aux_protected[mamba] - aux_protected_of(tree, mamba);
  const SideRules rules = side_rules(tree);
  if (!rules.swa_known) swa_moved = swa_delta;
  if (!rules.mamba_known) mamba_moved = mamba_delta;
  if (swa_moved != swa_delta || mamba_moved != mamba_delta) {
    return where + "SWA/Mamba protected slots moved by " + std::to_string(swa_delta) + "/" +
           std::to_string(mamba_delta) + ", the locked nodes hold " + std::to_string(swa_moved) +
           "/" + std::to_string(mamba_moved);
  }
  return "";
}

std::string check_released(const RadixTree& tree, const NodeSlotsBefore& before,
                           const ReleasedSlots& out, bool device, bool host, bool removed) {
  const std::string where = "tree.released_slots: node " + std::to_string(before.id) + ": ";
  for (size_t t = 0; t < kComponentTypesMax; ++t) {
    for (int side = 0; side < 2; ++side) {
      const bool taken = side == 0 ? device : host;
      const std::optional<IndexVector>& got = side == 0 ? out.device[t] : out.host[t];
      const NodeSlotsBefore::Value& had = side == 0 ? before.device[t] : before.host[t];
      const bool want = taken && had.size >= 0;
      const Tier tier = side == 0 ? Tier::kDevice : Tier::kHost;
      if (got.has_value() != want || (got && (!same_ends(*got, had) || got->tier() != tier))) {
        return where + std::string(to_string(static_cast<ComponentType>(t))) +
               (side == 0 ? " device" : " host") +
               " slots released: " + std::to_string(size_of(got)) + ", the node held " +
               std::to_string(had.size) + (taken ? "" : " and keeps them");
      }
    }
  }
  // The accounting dropped exactly what was released.
  const int64_t device_dropped =
      before.base.device_tokens - (tree.evictable_size() + tree.protected_size());
  if (device_dropped != (device ? std::max<int64_t>(before.device[0].size, 0) : 0)) {
    return where + "device tokens dropped by " + std::to_string(device_dropped);
  }
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    const int64_t dropped = before.base.aux_evictable[t] - aux_evictable_of(tree, t);
    if (dropped != (device ? std::max<int64_t>(before.device[t].size, 0) : 0)) {
      return where + std::string(to_string(static_cast<ComponentType>(t))) +
             " evictable slots dropped by " + std::to_string(dropped);
    }
  }
  const TreeNode* still = tree.find(before.id);
  if ((still == nullptr) != removed || tree.node_count() + (removed ? 1 : 0) != before.base.nodes) {
    return where + (removed ? "not removed" : "removed");
  }
  if (still != nullptr) {
    for (size_t t = 0; t < kComponentTypesMax; ++t) {
      if ((device && still->component(t).value) || (host && still->component(t).host_value)) {
        return where + "still holds released slots";
      }
    }
  }
  return "";
}

std::string check_host_insert_leaf(const RadixTree& tree, size_t aligned,
                                   const HostInsertResult& result, const IndexVector& host_value,
                                   std::span<const PageDigest> hashes) {
  if (result.inserted_len == 0) return "";
  const std::string where = "tree.host_insert_leaf: ";
  const TreeNode& leaf = *result.last_node;
  const auto page = static_cast<size_t>(tree.page_size());
  const size_t from = aligned - static_cast<size_t>(result.inserted_len);
  if (leaf.token_count() != result.inserted_len || !leaf.evicted() || !leaf.backed_up() ||
      leaf.full().host_value->size() != leaf.key.size()) {
    return where + "node " + id_of(&leaf) + " is not a host-only node of the inserted tokens";
  }
  for (size_t i = 0; i < leaf.key.size(); ++i) {
    if ((*leaf.full().host_value)[i] != host_value[from + i]) {
      return where + "host slot " + std::to_string(i) + " of node " + id_of(&leaf) +
             " is not the caller's";
    }
  }
  if (leaf.hash_value.size() != (hashes.empty() ? 0 : leaf.key.size() / page)) {
    return where + "node " + id_of(&leaf) + " holds " + std::to_string(leaf.hash_value.size()) +
           " page keys";
  }
  for (size_t i = 0; i < leaf.hash_value.size(); ++i) {
    if (leaf.hash_value[i] != hashes[from / page + i]) {
      return where + "page key " + std::to_string(i) + " of node " + id_of(&leaf) +
             " is not the caller's";
    }
  }
  return "";
}

}  // namespace kvsim
