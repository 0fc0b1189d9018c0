// An out-of-tree user of the component conformance kit. Everything here comes from the
// installed package (<prefix>/include/kvsim, kvsim::conformance); nothing from kvsim's tree.
//
// The component: the kit's page-checksum component (conformance/example_component.h) placed
// in a different auxiliary slot (the SWA slot instead of the Mamba one) with tighter pools,
// on a host this file writes itself — the KitSubject a team with its own TreeComponent
// writes (a tree hosting it, its pools, a CacheController for transfer resolution, the checks).
// A new component type brings its own host the same way, modelled on ExampleCache.
#include <memory>
#include <optional>
#include <string>

#include "conformance/conformance.h"
#include "core/backend/cpu_backend.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"
#include "core/tiers/cache_controller.h"

namespace kc = kvsim::conformance;
using namespace kvsim;

namespace {

constexpr ComponentType kSlot = ComponentType::kSwa;

class ExternalSubject final : public kc::KitSubject {
 public:
  explicit ExternalSubject(const kc::ExampleCacheOptions& options)
      : cache_(options),
        kv_device_(backend_, cache_.device_slots().slot_count(), 1, 8),
        kv_host_(backend_, cache_.host_slots().slot_count(), 1, 8, KVLayout::kLayerFirst),
        ck_device_(backend_, cache_.checksums().device_slots().slot_count(), 1, 8),
        ck_host_(backend_, cache_.checksums().host_slots().slot_count(), 1, 8,
                 KVLayout::kLayerFirst),
        controller_(backend_, kv_device_, cache_.device_slots(), kv_host_, cache_.host_slots(),
                    CacheControllerOptions{.page_size = options.page_size}) {
    controller_.add_side_pool(PoolName::kSwa, ck_device_, ck_host_);
  }

  RadixTree& tree() override { return cache_.tree(); }
  int32_t page_size() const override { return cache_.options().page_size; }
  void serve(Namespace ns, std::span<const Token> tokens) override { cache_.serve(ns, tokens); }
  int64_t backup(TreeNode& node) override { return cache_.backup(node); }
  int64_t evict_device(int64_t tokens) override { return cache_.evict(tokens); }
  int64_t evict_component(ComponentType type, int64_t slots) override {
    return type == kSlot ? cache_.evict_checksums(slots) : 0;
  }
  int64_t evict_host(int64_t tokens) override { return cache_.evict_host(tokens); }
  bool load_back(TreeNode& best_match_node) override { return cache_.load_back(best_match_node); }
  void settle() override { backend_.synchronize(); }
  void sanity(SanityReport& report) const override {
    cache_.sanity_check(report);
    for (const BackendViolation& v : backend_.violations())
      report.add("stream_lifetime", v.kind + ": " + v.detail);
  }
  std::optional<std::string> values_error(const TreeNode& node, ComponentType type) override {
    return cache_.values_error(node, type);
  }
  kc::TransferContext transfer_context(ComponentType type) override {
    if (type == ComponentType::kFull) return {&controller_, std::nullopt};
    return {&controller_, PoolName::kSwa};
  }
  std::optional<std::string> leak_error() override { return cache_.leak_error(); }

 private:
  kc::ExampleCache cache_;
  CpuBackend backend_;
  DeviceKVPool kv_device_;
  HostKVPool kv_host_;
  DeviceKVPool ck_device_;
  HostKVPool ck_host_;
  CacheController controller_;
};

kc::ComponentUnderTest external_component() {
  return kc::ComponentUnderTest{
      .name = "ExternalChecksum",
      .type = kSlot,
      .make = [](kc::KitGeometry g) -> std::unique_ptr<kc::KitSubject> {
        const bool roomy = g == kc::KitGeometry::kRoomy;
        return std::make_unique<ExternalSubject>(
            kc::ExampleCacheOptions{.page_size = kc::kKitPageSize,
                                    .device_tokens = roomy ? 1024 : 40,
                                    .host_tokens = roomy ? 2048 : 80,
                                    .checksum_device_slots = roomy ? 256 : 6,
                                    .checksum_host_slots = roomy ? 512 : 16,
                                    .slot = kSlot});
      },
      // A load-back reads the anchor's own checksums only (the component's lock contract).
      .load_back_reads = [](const TreeNode& anchor) -> std::vector<const TreeNode*> {
        if (anchor.is_root()) return {};
        return {&anchor};
      }};
}

[[maybe_unused]] const bool kRegistered = [] {
  kc::register_component_kit({external_component()}, "external_kit_tests");
  return true;
}();

}  // namespace
