#include "core/tree/mamba_component.h"

#include <string>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

constexpr ComponentType kMamba = ComponentType::kMamba;

class MambaValidator final : public MatchValidator {
 public:
  MatchVerdict visit(const TreeNode& node) override {
    const bool dev = node.has_device(kMamba);
    return {.device = dev, .host = dev || node.has_host(kMamba)};
  }
};

void check_shape(const TreeNode& n, const std::optional<IndexVector>& v, Tier tier,
                 const char* what, SanityReport& report) {
  if (!v) return;
  if (v->size() != 1 || v->tier() != tier) {
    report.add("tree.shape", std::string("mamba ") + what + " is not one state slot", n.id);
  }
  if (v->residency() != Residency::kHost) {
    report.add("residency", std::string("mamba ") + what + " stored in the tree is device-resident",
               n.id);
  }
}

}  // namespace

std::unique_ptr<MatchValidator> MambaComponent::make_validator() const {
  return std::make_unique<MambaValidator>();
}

void MambaComponent::acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) {
  if (anchor.is_root() || !anchor.has_device(kMamba)) return;
  tree.inc_aux_lock(anchor, kMamba);
  record.start[index_of(kMamba)] = anchor.id;
}

void MambaComponent::release_lock(RadixTree& tree, const LockRecord& record) {
  const auto& start = record.start[index_of(kMamba)];
  if (!start) return;
  TreeNode* node = tree.find(*start);
  KV_ASSERT(node != nullptr, "mamba-locked node " + std::to_string(*start) + " vanished");
  tree.dec_aux_lock(*node, kMamba);
}

void MambaComponent::on_split(TreeNode& /*prefix*/, TreeNode& suffix, size_t /*prefix_tokens*/) {
  KV_PROBE_IF(suffix.has_device(kMamba) || suffix.has_host(kMamba), mamba_split_state_node);
  // The state describes the end of the node: it stays with the suffix, which keeps the id
  // and every lock on it. The new upper half starts as a tombstone.
}

void MambaComponent::sanity_check(const RadixTree& tree, SanityReport& report) const {
  tree.for_each_node([&](const TreeNode& n) {
    const ComponentData& d = n.component(kMamba);
    check_shape(n, d.value, Tier::kDevice, "device value", report);
    check_shape(n, d.host_value, Tier::kHost, "host value", report);
  });
}

}  // namespace kvsim
