#include "conformance/example_component.h"

#include <string>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "sim/model/content_oracle.h"

namespace kvsim::conformance {
namespace {

// Visited root→leaf along a matched path; only the node itself matters.
class ChecksumValidator final : public MatchValidator {
 public:
  explicit ChecksumValidator(ComponentType slot) : slot_(slot) {}
  MatchVerdict visit(const TreeNode& node) override {
    const bool dev = node.has_device(slot_);
    return {.device = dev, .host = dev || node.has_host(slot_)};
  }

 private:
  ComponentType slot_;
};

void check_value(const TreeNode& n, const std::optional<IndexVector>& v, Tier tier, size_t slots,
                 const char* what, SanityReport& report) {
  if (!v) return;
  if (v->size() != slots || v->tier() != tier) {
    report.add("example.checksum_shape",
               std::string("checksum ") + what + " is not one " + std::string(to_string(tier)) +
                   " slot per page",
               n.id);
  }
  if (v->residency() != Residency::kHost) {
    report.add("residency", std::string("checksum ") + what + " stored as device-resident", n.id);
  }
}

}  // namespace

uint64_t page_checksum(Namespace ns, std::span<const Token> tokens, size_t end) {
  KV_ASSERT(end <= tokens.size(), "checksum past the end of the tokens");
  sim::PrefixHash h(ns);
  for (size_t i = 0; i < end; ++i)
    h.add(tokens[i]);
  return h.value() ^ 0x9E3779B97F4A7C15ull;  // distinct from any full-KV tag of the same prefix
}

PageChecksumComponent::PageChecksumComponent(int32_t page_size, ComponentType slot)
    : page_(page_size), slot_(slot) {
  KV_ASSERT(page_ > 0, "page size must be positive");
  KV_ASSERT(slot_ != ComponentType::kFull, "the full-attention slot cannot be borrowed");
}

std::unique_ptr<MatchValidator> PageChecksumComponent::make_validator() const {
  return std::make_unique<ChecksumValidator>(slot_);
}

void PageChecksumComponent::acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) {
  // Nothing to protect on an anchor without device checksums (the root, an evicted node, a
  // tombstone): record nothing, so release does nothing.
  if (anchor.is_root() || !anchor.has_device(slot_)) return;
  tree.inc_aux_lock(anchor, slot_);
  record.start[index_of(slot_)] = anchor.id;
  record.aux[index_of(slot_)] = static_cast<uint64_t>(anchor.token_count());
}

void PageChecksumComponent::release_lock(RadixTree& tree, const LockRecord& record) {
  const auto& start = record.start[index_of(slot_)];
  if (!start) return;
  TreeNode* node = tree.find(*start);
  KV_ASSERT(node != nullptr, "checksum-locked node " + std::to_string(*start) + " vanished");
  // The anchor keeps its id through splits (it becomes the lower half); the upper halves split
  // off it since acquire sit directly above it and inherited the lock count.
  uint64_t remaining = record.aux[index_of(slot_)];
  for (TreeNode* n = node; remaining > 0; n = n->parent) {
    KV_ASSERT(!n->is_root(), "checksum lock release ran past the root");
    const auto len = static_cast<uint64_t>(n->token_count());
    KV_ASSERT(len <= remaining, "checksum lock release does not end on a node boundary");
    tree.dec_aux_lock(*n, slot_);
    remaining -= len;
  }
}

void PageChecksumComponent::on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) {
  const size_t pages = prefix_tokens / static_cast<size_t>(page_);
  ComponentData& from = suffix.component(slot_);
  ComponentData& to = prefix.component(slot_);
  if (from.value) {
    to.value = from.value->slice(0, pages);
    from.value = from.value->slice(pages, from.value->size());
    to.lock_ref = from.lock_ref;  // a lock on the old node covers both halves
  }
  if (from.host_value) {
    to.host_value = from.host_value->slice(0, pages);
    from.host_value = from.host_value->slice(pages, from.host_value->size());
  }
}

void PageChecksumComponent::sanity_check(const RadixTree& tree, SanityReport& report) const {
  tree.for_each_node([&](const TreeNode& n) {
    const ComponentData& d = n.component(slot_);
    check_value(n, d.value, Tier::kDevice, slots_for(n), "device value", report);
    check_value(n, d.host_value, Tier::kHost, slots_for(n), "host value", report);
  });
}

ChecksumPool::ChecksumPool(int64_t device_slots, int64_t host_slots)
    : device_slots_(Tier::kDevice, device_slots, 1),
      host_slots_(Tier::kHost, host_slots, 1),
      device_(static_cast<size_t>(device_slots + 1), 0),
      host_(static_cast<size_t>(host_slots + 1), 0) {}

}  // namespace kvsim::conformance
