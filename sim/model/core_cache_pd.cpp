// KvsimCoreCache: PD disaggregation on the decode side — metadata received from the prefill
// side, and retract-resume through a CPU copy of the KV and every side buffer (seed 003).
#include "sim/base/rng.h"
#include "sim/model/content_oracle.h"
#include "sim/model/core_cache.h"

namespace kvsim::sim {

MetadataRecord KvsimCoreCache::expected_metadata(const SimRequest& r) const {
  Rng rng(r.rid * 0x2545F4914F6CDD1Dull);
  MetadataRecord m;
  m.first_output_token = static_cast<Token>(rng.below(50000));
  m.cached_tokens.total = static_cast<int64_t>(r.prompt_len);
  m.cached_tokens.device = static_cast<int64_t>(rng.below(r.prompt_len + 1));
  m.output_logprob = -static_cast<double>(rng.below(1000)) / 100.0;
  for (int i = 0; i < 4; ++i)
    m.top_k_ids.push_back(static_cast<Token>(rng.below(50000)));
  m.hidden_state.resize(32);
  for (std::byte& b : m.hidden_state)
    b = static_cast<std::byte>(rng.below(256));
  for (int i = 0; i < 8; ++i)
    m.sparse_top_k.push_back(static_cast<int32_t>(rng.below(4096)));
  m.bootstrap_room = rng.next();
  return m;
}

bool KvsimCoreCache::check_metadata(const SimRequest& r) {
  const CoreRequest& cr = state(r);
  if (!cr.metadata) return true;
  const char* field = first_differing_field(*cr.metadata, expected_metadata(r));
  if (field == nullptr) return true;
  fail("metadata.isolation", "request " + std::to_string(r.rid) + "'s metadata field " + field +
                                 " is not what its prefill sent: the slot it was read from was "
                                 "cleared or reused, and the request's copy changed with it");
  return false;
}

CpuCopyPools KvsimCoreCache::cpu_copy_pools() {
  return CpuCopyPools{.kv = cache_->device_pool(), .sparse_index = sparse_.get()};
}

void KvsimCoreCache::offload(SimRequest& r) {
  CoreRequest& cr = state(r);
  const RetractedRequestSlots slots{.token_slots = cr.kv->kv()};
  cr.cpu_copy =
      get_cpu_copy(backend_, slots, cpu_copy_pools(), scenario_.scheduler.cpu_copy_chunk_tokens);
  cr.offloaded_slots = cr.kv->kv().size();
  cr.kv->abort();  // the slots go back to the pool, to be reused by others at once
  cr.kv.reset();
}

bool KvsimCoreCache::resume(SimRequest& r) {
  CoreRequest& cr = state(r);
  auto kv = std::make_unique<RequestKV>(*cache_, r.ns);
  if (!kv->admit(r.tokens, false, /*use_prefix_cache=*/false)) return false;
  if (!kv->extend(cr.offloaded_slots)) {
    kv->abort();
    return false;
  }
  load_cpu_copy(backend_, *cr.cpu_copy, RetractedRequestSlots{.token_slots = kv->kv()},
                cpu_copy_pools());
  cr.cpu_copy.reset();
  cr.kv = std::move(kv);
  return true;
}

void KvsimCoreCache::verify_resumed(SimRequest& r) {
  if (scenario_.check.content && !read_prefix(r)) return;
  check_metadata(r);
}

}  // namespace kvsim::sim
