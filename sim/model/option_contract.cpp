#include "sim/model/option_contract.h"

#include <exception>
#include <stdexcept>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"
#include "core/tree/eviction_policy.h"

namespace kvsim::sim {
namespace {

// The calls' edge on a freshly built cache: alloc_device / alloc_swa of 0 is an empty vector,
// of a negative or non-page-multiple count nullopt (nothing allocated), and free_device /
// free_swa of an empty vector does nothing.
std::optional<std::string> check_call_edge(HiCache& cache) {
  const int64_t page = cache.options().page_size;
  struct Pool {
    const char* name;
    std::optional<IndexVector> (HiCache::*alloc)(int64_t);
    void (HiCache::*free)(const IndexVector&);
  };
  std::vector<Pool> pools = {{"alloc_device", &HiCache::alloc_device, &HiCache::free_device}};
  if (cache.options().has_swa()) {
    pools.push_back({"alloc_swa", &HiCache::alloc_swa, &HiCache::free_swa});
  }
  for (const Pool& p : pools) {
    const int64_t before = cache.available_device_size();
    const std::optional<IndexVector> zero = (cache.*p.alloc)(0);
    if (!zero || zero->size() != 0) {
      return std::string(p.name) + "(0) returned " +
             (zero ? std::to_string(zero->size()) + " slots" : std::string("nullopt")) +
             " instead of an empty vector";
    }
    (cache.*p.free)(*zero);
    std::vector<int64_t> wrong = {-page};
    if (page > 1) wrong.push_back(page + 1);
    for (int64_t n : wrong) {
      if (const std::optional<IndexVector> got = (cache.*p.alloc)(n)) {
        return std::string(p.name) + "(" + std::to_string(n) + ") with pages of " +
               std::to_string(page) + " returned " + std::to_string(got->size()) +
               " slots instead of nullopt";
      }
    }
    if (cache.available_device_size() != before) {
      return std::string(p.name) + " calls that allocate nothing changed the free device slots (" +
             std::to_string(before) + " -> " + std::to_string(cache.available_device_size()) + ")";
    }
  }
  return std::nullopt;
}

// The prefetch calls' edge (hi_cache.h): without a storage tier prefetch_from_storage starts
// nothing; with one, a second prefetch of a request already prefetching is refused, releasing a
// request that has no prefetch does nothing, and releasing one that has revokes it, leaving the
// cache sane with nothing prefetching. The simulator itself prefetches only with a store and
// releases only requests it knows are prefetching, so these are a direct caller's paths.
std::optional<std::string> check_prefetch_edge(const HiCacheOptions& shape) {
  if (!shape.hierarchical) return std::nullopt;  // a prefetch fills the host tier
  HiCacheOptions o = shape;
  o.prefetch_threshold_tokens = 0;
  o.prefetch_capacity_fraction = 1.0;
  std::vector<Token> tokens(static_cast<size_t>(2 * o.page_size));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<Token>(i + 1);
  {
    CpuBackend backend;
    HiCache cache(backend, o);
    TreeNode& root = *cache.match_prefix(0, tokens).last_host_node;
    if (cache.prefetch_from_storage(1, 0, root, tokens, 0) || !cache.prefetches().empty()) {
      return std::string("prefetch_from_storage without a storage tier started a prefetch");
    }
    cache.release_aborted_request(1);
  }
  CpuBackend backend;
  MemoryStorage store;
  HiCache cache(backend, o, &store);
  TreeNode& root = *cache.match_prefix(0, tokens).last_host_node;
  if (!cache.prefetch_from_storage(1, 0, root, tokens, 0)) {
    return "prefetch_from_storage of " + std::to_string(tokens.size()) +
           " tokens below the root (threshold 0, no prefetch running) was refused";
  }
  if (cache.prefetch_from_storage(1, 0, root, tokens, 0) || cache.prefetches().size() != 1) {
    return std::string("a second prefetch_from_storage of a request already prefetching started");
  }
  cache.release_aborted_request(2);  // no prefetch: nothing to do
  if (cache.prefetches().size() != 1 || cache.stats().prefetch_revoked != 0) {
    return std::string("release_aborted_request of a request without a prefetch changed one");
  }
  cache.release_aborted_request(1);
  SanityReport report;
  cache.sanity_check(report);
  if (!cache.prefetches().empty() || cache.stats().prefetch_revoked != 1 || !report.ok()) {
    return "release_aborted_request of a prefetching request left " +
           std::to_string(cache.prefetches().size()) + " prefetch(es), " +
           std::to_string(cache.stats().prefetch_revoked) + " revoked; sanity: " + report.summary();
  }
  return std::nullopt;
}

// A prefetch that stops after its first page (page_size 1 included: one token), as a direct
// caller drives it: the store holds the first of two pages, the query finds one page, one read
// brings it, and the finished prefetch puts exactly that page in the tree on host and reports it
// to its request once; then every storage worker is idle. With one-token pages the hunt's
// workloads rarely end a prefetch after a single read (seed-35 mutant 750: `usable > 0` shifted
// to `> 1` dropped that token).
std::optional<std::string> check_prefetch_page_edge(const HiCacheOptions& shape, int64_t page) {
  if (!shape.hierarchical) return std::nullopt;
  HiCacheOptions o = shape;
  o.page_size = page;
  o.device_tokens = o.host_tokens = 2 * page;
  if (o.has_swa()) {
    o.swa_device_tokens = o.swa_device_tokens > 0 ? 2 * page : 0;
    o.swa_host_tokens = o.swa_host_tokens > 0 ? 2 * page : 0;
  }
  o.prefetch_threshold_tokens = 0;
  o.prefetch_capacity_fraction = 1.0;
  std::vector<Token> tokens(static_cast<size_t>(2 * page));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<Token>(i + 7);
  CpuBackend backend;
  MemoryStorage store;
  HiCache cache(backend, o, &store);
  const std::vector<PageDigest> keys = hash_pages(namespace_seed(0), tokens, page);
  const std::vector<std::byte> bytes(
      static_cast<size_t>(page) * static_cast<size_t>(o.layer_count) * o.item_bytes,
      std::byte{0x5a});
  store.set(keys[0], bytes);
  const std::string at =
      "a prefetch whose store holds the first of two " + std::to_string(page) + "-token pages: ";
  TreeNode& root = *cache.match_prefix(0, tokens).last_host_node;
  if (!cache.prefetch_from_storage(1, 0, root, tokens, 0)) return at + "refused";
  if (!cache.storage_query_step() || cache.prefetches().at(1).hit_tokens != page) {
    return at + "the query found " + std::to_string(cache.prefetches().at(1).hit_tokens) +
           " token(s)";
  }
  cache.check_hicache_events();  // the hit is given host slots
  if (!cache.storage_io_step() || cache.prefetches().at(1).completed_tokens != page) {
    return at + "the read brought " + std::to_string(cache.prefetches().at(1).completed_tokens) +
           " token(s)";
  }
  if (!cache.check_prefetch_progress(1, 1)) return at + "a complete prefetch kept its request";
  const int64_t loaded = cache.pop_prefetch_loaded_tokens(1);
  const int64_t again = cache.pop_prefetch_loaded_tokens(1);
  if (loaded != page || again != 0 || cache.stats().prefetched_tokens != page) {
    return at + "the request was handed " + std::to_string(loaded) + " then " +
           std::to_string(again) + " token(s); the tree took " +
           std::to_string(cache.stats().prefetched_tokens);
  }
  SanityReport report;
  cache.sanity_check(report);
  if (cache.storage_query_step() || cache.storage_io_step() || cache.storage_backup_step() ||
      !cache.prefetches().empty() || !report.ok()) {
    return at +
           "a storage worker still had work, or a prefetch is live; sanity: " + report.summary();
  }
  return std::nullopt;
}

// The pools a built cache holds have the sizes its effective options promise: a side pool
// sized 0 ("same as the main pool") takes the main pool's size, a Mamba host pool sized 0
// twice the device states.
std::optional<std::string> check_pool_sizes(HiCache& cache) {
  const HiCacheOptions& e = cache.options();
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> pools = {
      {"device", {cache.device_slots().capacity(), e.device_tokens}},
      {"host", {cache.host_slots().capacity(), e.host_tokens}}};
  if (const SidePool* swa = cache.side_pool(ComponentType::kSwa)) {
    pools.push_back({"swa_device",
                     {swa->device_slots().capacity(),
                      e.swa_device_tokens > 0 ? e.swa_device_tokens : e.device_tokens}});
    pools.push_back({"swa_host",
                     {swa->host_slots().capacity(),
                      e.swa_host_tokens > 0 ? e.swa_host_tokens : e.host_tokens}});
  }
  if (const SidePool* mamba = cache.side_pool(ComponentType::kMamba)) {
    pools.push_back({"mamba_device", {mamba->device_slots().capacity(), e.mamba_device_states}});
    pools.push_back({"mamba_host",
                     {mamba->host_slots().capacity(),
                      e.mamba_host_states > 0 ? e.mamba_host_states : 2 * e.mamba_device_states}});
  }
  for (const auto& [name, got_want] : pools) {
    if (got_want.first != got_want.second) {
      return "the " + name + " pool holds " + std::to_string(got_want.first) +
             " slots; its options promise " + std::to_string(got_want.second);
    }
  }
  return std::nullopt;
}

// What constructing a cache with `o` did: "ok", "invalid_argument", or what else happened;
// with `check_calls`, also what the calls' edge of the built cache did.
struct Built {
  bool ok = false;
  bool invalid_argument = false;
  std::string other;  // an assertion or another exception: never part of the contract
  HiCacheOptions effective;
  std::optional<std::string> calls;       // a breach of the calls' edge
  std::optional<std::string> pool_sizes;  // a pool built with another size than promised
};

Built build(const HiCacheOptions& o, bool check_calls = false) {
  Built b;
  CpuBackend backend;
  ScopedThrowingAsserts asserts;
  try {
    HiCache cache(backend, o);
    b.ok = true;
    b.effective = cache.options();
    b.pool_sizes = check_pool_sizes(cache);
    if (check_calls) {
      try {
        b.calls = check_call_edge(cache);
        if (!b.calls) b.calls = check_prefetch_edge(o);
        // The run's own page size, and one-token pages whatever the run's.
        if (!b.calls) b.calls = check_prefetch_page_edge(o, o.page_size);
        if (!b.calls && o.page_size != 1) b.calls = check_prefetch_page_edge(o, 1);
      } catch (const std::exception& e) {
        b.calls = std::string("a call at the API edge raised: ") + e.what();
      }
    }
  } catch (const std::invalid_argument&) {
    b.invalid_argument = true;
  } catch (const AssertionFailure& e) {
    b.other = std::string("an assertion: ") + e.what();
  } catch (const std::exception& e) {
    b.other = std::string("an exception: ") + e.what();
  }
  return b;
}

std::optional<std::string> check_all_policy_names() {
  if (auto p = policy_names_problem("eviction_policy", {EvictionPolicy::kLru, EvictionPolicy::kLfu},
                                    &parse_eviction_policy)) {
    return p;
  }
  if (auto p = policy_names_problem("write_policy",
                                    {WritePolicy::kWriteThrough,
                                     WritePolicy::kWriteThroughSelective, WritePolicy::kWriteBack},
                                    &parse_write_policy)) {
    return p;
  }
  return policy_names_problem("prefetch_stop_policy",
                              {PrefetchStopPolicy::kBestEffort, PrefetchStopPolicy::kWaitComplete,
                               PrefetchStopPolicy::kTimeout},
                              &parse_prefetch_stop_policy);
}

std::string sizes(const HiCacheOptions& o) {
  std::string s = "page_size " + std::to_string(o.page_size) + ", device_tokens " +
                  std::to_string(o.device_tokens) + ", host_tokens " +
                  std::to_string(o.host_tokens);
  if (o.has_swa()) {
    s += ", swa_device_tokens " + std::to_string(o.swa_device_tokens) + ", swa_host_tokens " +
         std::to_string(o.swa_host_tokens);
  }
  return s;
}

}  // namespace

std::optional<std::string> check_option_contract(const HiCacheOptions& options) {
  const probes::Uncounted own_calls;  // the contract's own calls are not the run's coverage
  if (std::optional<std::string> names = check_all_policy_names()) return names;
  // Small pools keep the check cheap; only the shape of `options` matters to the rules.
  const int64_t page = options.page_size;
  HiCacheOptions base = options;
  base.device_tokens = 2 * page;
  base.host_tokens = 2 * page;
  if (base.has_swa()) {
    base.swa_device_tokens = options.swa_device_tokens > 0 ? 2 * page : 0;
    base.swa_host_tokens = options.swa_host_tokens > 0 ? 2 * page : 0;
  }

  // Sizes off the page grid are rounded down, not refused (SGLang's allocator does the same).
  if (page > 1) {
    HiCacheOptions odd = base;
    odd.device_tokens += page - 1;
    odd.host_tokens += page - 1;
    if (odd.swa_device_tokens > 0) odd.swa_device_tokens += page - 1;
    if (odd.swa_host_tokens > 0) odd.swa_host_tokens += page - 1;
    const Built b = build(odd);
    if (!b.ok) {
      return "pool sizes off the page grid (" + sizes(odd) + ") were refused with " +
             (b.invalid_argument ? "invalid_argument" : b.other) + " instead of rounded down";
    }
    const HiCacheOptions& e = b.effective;
    if (e.device_tokens != base.device_tokens || e.host_tokens != base.host_tokens ||
        e.swa_device_tokens != base.swa_device_tokens ||
        e.swa_host_tokens != base.swa_host_tokens) {
      return "pool sizes off the page grid (" + sizes(odd) + ") became " + sizes(e) +
             ", not rounded down to whole pages (" + sizes(base) + ")";
    }
  }
  // The shape itself builds, and the calls' edge of the built cache holds.
  const Built valid = build(base, /*check_calls=*/true);
  if (!valid.ok) {
    return "a valid configuration (" + sizes(base) + ") was refused with " +
           (valid.invalid_argument ? "invalid_argument" : valid.other);
  }
  if (valid.calls) return valid.calls;
  if (valid.pool_sizes) return *valid.pool_sizes + " (" + sizes(base) + ")";
  // The smallest legal sizes: the main pools one page each (side pools following them), then
  // the side pools one page each (one Mamba state) beside larger main pools, so a side pool
  // that took the main pool's size instead of its own would show.
  HiCacheOptions least_main = base;
  least_main.device_tokens = least_main.host_tokens = page;
  least_main.swa_device_tokens = least_main.swa_host_tokens = 0;
  HiCacheOptions least_side = base;
  if (least_side.has_swa()) least_side.swa_device_tokens = least_side.swa_host_tokens = page;
  if (least_side.has_mamba()) least_side.mamba_device_states = least_side.mamba_host_states = 1;
  for (const HiCacheOptions& least : {least_main, least_side}) {
    const Built smallest = build(least);
    if (!smallest.ok) {
      return "a smallest valid configuration (" + sizes(least) + ") was refused with " +
             (smallest.invalid_argument ? "invalid_argument" : smallest.other);
    }
    if (smallest.pool_sizes) return *smallest.pool_sizes + " (" + sizes(least) + ")";
  }

  // Each caller mistake alone: std::invalid_argument, never accepted, never an assertion.
  struct Mistake {
    const char* what;
    void (*apply)(HiCacheOptions&);
  };
  static constexpr Mistake kMistakes[] = {
      {"page_size 0", [](HiCacheOptions& o) { o.page_size = 0; }},
      {"a negative page_size", [](HiCacheOptions& o) { o.page_size = -o.page_size; }},
      {"device_tokens below one page",
       [](HiCacheOptions& o) { o.device_tokens = o.page_size - 1; }},
      {"host_tokens below one page", [](HiCacheOptions& o) { o.host_tokens = o.page_size - 1; }},
      {"swa_device_tokens below one page",
       [](HiCacheOptions& o) {
         if (o.has_swa() && o.page_size > 1) o.swa_device_tokens = o.page_size - 1;
       }},
      {"swa_host_tokens below one page",
       [](HiCacheOptions& o) {
         if (o.has_swa() && o.page_size > 1) o.swa_host_tokens = o.page_size - 1;
       }},
  };
  for (const Mistake& m : kMistakes) {
    HiCacheOptions bad = base;
    m.apply(bad);
    if (bad.page_size == base.page_size && bad.device_tokens == base.device_tokens &&
        bad.host_tokens == base.host_tokens && bad.swa_device_tokens == base.swa_device_tokens &&
        bad.swa_host_tokens == base.swa_host_tokens) {
      continue;  // the rule does not apply to this shape
    }
    const Built b = build(bad);
    if (b.invalid_argument) continue;
    return std::string(m.what) + " (" + sizes(bad) + ") was " +
           (b.ok ? "accepted" : "met with " + b.other) + " instead of std::invalid_argument";
  }
  return std::nullopt;
}

}  // namespace kvsim::sim
