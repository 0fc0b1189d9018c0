#include "tests/support/hybrid_fixture.h"

#include "sim/model/content_oracle.h"

namespace kvsim::testing {

HiCacheOptions HybridFixture::hybrid_options() {
  return HiCacheOptions{.page_size = 4,
                        .layer_count = 2,
                        .item_bytes = 16,
                        .device_tokens = 64,
                        .host_tokens = 128,
                        .load_back_threshold_tokens = 1,
                        .prefetch_threshold_tokens = 8,
                        .swa_window_tokens = 8,
                        .mamba_device_states = 8,
                        .mamba_layer_count = 2,
                        .mamba_state_bytes = 32};
}

HybridFixture::HybridFixture(HiCacheOptions options)
    : cache_(std::make_unique<HiCache>(backend_, options)) {}

HybridFixture::~HybridFixture() = default;

void HybridFixture::TearDown() {
  if (!HasFatalFailure()) expect_sane();
}

void HybridFixture::expect_sane() {
  SanityReport report;
  cache_->sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

void HybridFixture::forward(const RequestKV& req, std::span<const Token> tokens, size_t from) {
  const StreamId compute = backend_.compute_stream();
  DeviceKVPool& kv = cache_->device_pool();
  for (size_t i = from; i < tokens.size(); ++i) {
    for (int32_t layer = 0; layer < kv.layer_count(); ++layer) {
      kv.write_item_async(compute, layer, req.kv()[i],
                          sim::expected_item(req.ns(), tokens, i, layer, kv.item_bytes()));
    }
    if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
      DeviceKVPool& pool = swa->device_pool();
      for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
        pool.write_item_async(
            compute, layer, (*req.swa())[i],
            sim::expected_swa_item(req.ns(), tokens, i, layer, pool.item_bytes()));
      }
    }
  }
  if (SidePool* mamba = cache_->side_pool(ComponentType::kMamba)) {
    // The state checkpoint at the last page boundary is what the tree may adopt.
    const auto page = static_cast<size_t>(cache_->options().page_size);
    const size_t aligned = tokens.size() / page * page;
    DeviceKVPool& pool = mamba->device_pool();
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      pool.write_item_async(
          compute, layer, *req.mamba_state(),
          sim::expected_mamba_state(req.ns(), tokens, aligned, layer, pool.item_bytes()));
    }
  }
}

AdmitOutcome HybridFixture::serve(Namespace ns, std::span<const Token> tokens) {
  cache_->check_hicache_events();  // the scheduler's poll point, once per iteration
  RequestKV req(*cache_, ns);
  std::optional<AdmitOutcome> out = req.admit(tokens);
  KV_ASSERT(out.has_value(), "no Mamba state slot for a request");
  EXPECT_TRUE(prefix_ok(req, tokens)) << "admitted with " << out->device_hit_tokens
                                      << " device and " << out->host_hit_tokens << " host tokens";
  bool grown = req.extend(tokens.size());
  if (!grown) {  // in-flight write-throughs pin their nodes: wait for them, then retry
    cache_->flush();
    grown = req.extend(tokens.size());
  }
  if (!grown) {
    req.abort();
    ADD_FAILURE() << "pools exhausted: device " << cache_->available_device_size() << " free, "
                  << cache_->tree().evictable_size() << " evictable, "
                  << cache_->tree().protected_size() << " protected";
    return *out;
  }
  forward(req, tokens, req.owned_from());
  req.finish(tokens);
  return *out;
}

::testing::AssertionResult HybridFixture::prefix_ok(const RequestKV& req,
                                                    std::span<const Token> tokens) {
  backend_.synchronize();
  DeviceKVPool& kv = cache_->device_pool();
  const size_t n = req.owned_from();
  for (size_t i = 0; i < n; ++i) {
    for (int32_t layer = 0; layer < kv.layer_count(); ++layer) {
      if (kv.read_item_sync(layer, req.kv()[i]) !=
          sim::expected_item(req.ns(), tokens, i, layer, kv.item_bytes())) {
        return ::testing::AssertionFailure() << "full KV position " << i << " layer " << layer;
      }
    }
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    const auto window = static_cast<size_t>(cache_->options().swa_window_tokens);
    for (size_t i = n > window ? n - window : 0; i < n; ++i) {
      const SlotIndex s = (*req.swa())[i];
      if (s == 0) return ::testing::AssertionFailure() << "SWA window position " << i << " absent";
      for (int32_t layer = 0; layer < swa->device_pool().layer_count(); ++layer) {
        if (swa->device_pool().read_item_sync(layer, s) !=
            sim::expected_swa_item(req.ns(), tokens, i, layer, swa->device_pool().item_bytes())) {
          return ::testing::AssertionFailure() << "SWA position " << i << " layer " << layer;
        }
      }
    }
  }
  if (SidePool* mamba = cache_->side_pool(ComponentType::kMamba); mamba && n > 0) {
    for (int32_t layer = 0; layer < mamba->device_pool().layer_count(); ++layer) {
      if (mamba->device_pool().read_item_sync(layer, *req.mamba_state()) !=
          sim::expected_mamba_state(req.ns(), tokens, n, layer,
                                    mamba->device_pool().item_bytes())) {
        return ::testing::AssertionFailure()
               << "Mamba state after " << n << " tokens, layer " << layer;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult HybridFixture::node_ok(const TreeNode& node) {
  backend_.synchronize();
  const std::vector<Token> prefix = RadixTree::prefix_tokens(node);
  const size_t begin = prefix.size() - node.key.size();
  auto check_pool = [&](KVPool& pool, const IndexVector& slots, bool swa, const char* what) {
    for (size_t i = 0; i < slots.size(); ++i) {
      for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
        const auto expected =
            swa ? sim::expected_swa_item(node.ns, prefix, begin + i, layer, pool.item_bytes())
                : sim::expected_item(node.ns, prefix, begin + i, layer, pool.item_bytes());
        if (pool.read_item_sync(layer, slots[i]) != expected) {
          return ::testing::AssertionFailure()
                 << what << " of node " << node.id << " position " << begin + i;
        }
      }
    }
    return ::testing::AssertionSuccess();
  };
  if (node.full().value) {
    auto r = check_pool(cache_->device_pool(), *node.full().value, false, "full device");
    if (!r) return r;
  }
  if (node.full().host_value) {
    auto r = check_pool(cache_->host_pool(), *node.full().host_value, false, "full host");
    if (!r) return r;
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    const ComponentData& d = node.component(ComponentType::kSwa);
    if (d.value) {
      auto r = check_pool(swa->device_pool(), *d.value, true, "swa device");
      if (!r) return r;
    }
    if (d.host_value) {
      auto r = check_pool(swa->host_pool(), *d.host_value, true, "swa host");
      if (!r) return r;
    }
  }
  if (SidePool* mamba = cache_->side_pool(ComponentType::kMamba)) {
    const ComponentData& d = node.component(ComponentType::kMamba);
    auto check_state = [&](KVPool& pool, SlotIndex s, const char* what) {
      for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
        if (pool.read_item_sync(layer, s) !=
            sim::expected_mamba_state(node.ns, prefix, prefix.size(), layer, pool.item_bytes())) {
          return ::testing::AssertionFailure() << what << " of node " << node.id;
        }
      }
      return ::testing::AssertionSuccess();
    };
    if (d.value) {
      auto r = check_state(mamba->device_pool(), (*d.value)[0], "mamba device state");
      if (!r) return r;
    }
    if (d.host_value) {
      auto r = check_state(mamba->host_pool(), (*d.host_value)[0], "mamba host state");
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvsim::testing
