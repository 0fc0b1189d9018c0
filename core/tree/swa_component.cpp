#include "core/tree/swa_component.h"

#include <string>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

constexpr ComponentType kSwa = ComponentType::kSwa;

// Tracks, root→leaf, how many tokens directly above the current end have SWA data.
class SwaValidator final : public MatchValidator {
 public:
  explicit SwaValidator(int64_t window) : window_(window) {}
  MatchVerdict visit(const TreeNode& node) override {
    const int64_t len = node.token_count();
    total_ += len;
    const bool dev = node.has_device(kSwa);
    run_device_ = dev ? run_device_ + len : 0;
    run_host_ = (dev || node.has_host(kSwa)) ? run_host_ + len : 0;
    return {.device = run_device_ >= window_ || run_device_ == total_,
            .host = run_host_ >= window_ || run_host_ == total_};
  }

 private:
  int64_t window_;
  int64_t total_ = 0;
  int64_t run_device_ = 0;
  int64_t run_host_ = 0;
};

void check_shape(const TreeNode& n, const std::optional<IndexVector>& v, Tier tier,
                 const char* what, SanityReport& report) {
  if (!v) return;
  if (v->size() != n.key.size() || v->tier() != tier) {
    report.add("tree.shape", std::string("swa ") + what + " does not match the key", n.id);
  }
  if (v->residency() != Residency::kHost) {
    report.add("residency", std::string("swa ") + what + " stored in the tree is device-resident",
               n.id);
  }
}

}  // namespace

SwaComponent::SwaComponent(int64_t window_tokens) : window_(window_tokens) {
  KV_ASSERT(window_ > 0, "SWA window must be positive");
}

std::unique_ptr<MatchValidator> SwaComponent::make_validator() const {
  return std::make_unique<SwaValidator>(window_);
}

void SwaComponent::acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) {
  if (anchor.is_root() || !anchor.has_device(kSwa)) return;  // no window ends here
  uint64_t locked = 0;
  for (TreeNode* n = &anchor; !n->is_root() && static_cast<int64_t>(locked) < window_;
       n = n->parent) {
    if (!n->has_device(kSwa)) {  // the window reaches a tombstone only at the path start
      KV_PROBE(swa_lock_stops_at_tombstone);
      break;
    }
    tree.inc_aux_lock(*n, kSwa);
    locked += static_cast<uint64_t>(n->token_count());
  }
  KV_VERIFY(check_lock_reach(anchor, locked).empty(), check_lock_reach(anchor, locked));
  record.start[index_of(kSwa)] = anchor.id;
  record.aux[index_of(kSwa)] = locked;
}

std::string SwaComponent::check_lock_reach(const TreeNode& anchor, uint64_t locked) const {
  uint64_t below_top = 0;
  uint64_t covered = 0;
  for (const TreeNode* n = &anchor; covered < locked; n = n->parent) {
    if (n->is_root())
      return "window lock of " + std::to_string(locked) + " tokens runs past the root";
    below_top = covered;
    covered += static_cast<uint64_t>(n->token_count());
  }
  if (covered != locked) {
    return "window lock of " + std::to_string(locked) + " tokens does not end on a node boundary";
  }
  if (below_top >= static_cast<uint64_t>(window_)) {
    return "window lock of node " + std::to_string(anchor.id) + " covers " +
           std::to_string(locked) + " tokens: the nodes below its topmost already hold " +
           std::to_string(below_top) + ", the whole window of " + std::to_string(window_);
  }
  return "";
}

void SwaComponent::release_lock(RadixTree& tree, const LockRecord& record) {
  const auto& start = record.start[index_of(kSwa)];
  if (!start) return;
  TreeNode* node = tree.find(*start);
  KV_ASSERT(node != nullptr, "window-locked node " + std::to_string(*start) + " vanished");
  uint64_t remaining = record.aux[index_of(kSwa)];
  for (TreeNode* n = node; remaining > 0; n = n->parent) {
    KV_ASSERT(!n->is_root(), "window lock release ran past the root");
    const auto len = static_cast<uint64_t>(n->token_count());
    KV_ASSERT(len <= remaining, "window lock release does not end on a node boundary");
    tree.dec_aux_lock(*n, kSwa);
    remaining -= len;
  }
}

void SwaComponent::on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) {
  ComponentData& from = suffix.component(kSwa);
  ComponentData& to = prefix.component(kSwa);
  if (from.value) {
    to.value = from.value->slice(0, prefix_tokens);
    from.value = from.value->slice(prefix_tokens, from.value->size());
    to.lock_ref = from.lock_ref;  // a window lock through the suffix also covers the prefix
    KV_PROBE_IF(from.lock_ref > 0, swa_split_window_locked);
  }
  if (from.host_value) {
    to.host_value = from.host_value->slice(0, prefix_tokens);
    from.host_value = from.host_value->slice(prefix_tokens, from.host_value->size());
  }
}

std::vector<TreeNode*> SwaComponent::window_nodes(TreeNode& anchor) const {
  std::vector<TreeNode*> nodes;
  int64_t covered = 0;
  for (TreeNode* n = &anchor; !n->is_root() && covered < window_; n = n->parent) {
    nodes.push_back(n);
    covered += n->token_count();
  }
  return nodes;
}

void SwaComponent::sanity_check(const RadixTree& tree, SanityReport& report) const {
  tree.for_each_node([&](const TreeNode& n) {
    const ComponentData& d = n.component(kSwa);
    check_shape(n, d.value, Tier::kDevice, "device value", report);
    check_shape(n, d.host_value, Tier::kHost, "host value", report);
  });
}

}  // namespace kvsim
