#include "sim/smoke_run.h"

#include <memory>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "sim/content_oracle.h"

namespace kvsim::sim {
namespace {

// SplitMix64: a tiny, fully specified generator (std distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

class Driver {
 public:
  explicit Driver(const SmokeOptions& o) : options_(o), rng_(o.seed) {
    cache_ = std::make_unique<HiCache>(backend_, o.cache);
  }

  SmokeSummary run() {
    ScopedThrowingAsserts asserts;
    try {
      std::vector<std::vector<Token>> prompts;
      for (int p = 0; p < 4; ++p)
        prompts.push_back(random_tokens(32 + rng_.below(64)));
      std::vector<std::vector<Token>> sessions(8);
      for (int64_t r = 0; r < options_.requests && summary_.ok; ++r) {
        std::vector<Token> tokens;
        const uint64_t kind = rng_.below(3);
        const size_t session = rng_.below(sessions.size());
        if (kind == 0) {  // shared system prompt + question
          tokens = prompts[rng_.below(prompts.size())];
        } else if (kind == 1) {  // a multi-turn session that grows
          tokens = sessions[session];
        }
        std::vector<Token> tail = random_tokens(8 + rng_.below(48));
        tokens.insert(tokens.end(), tail.begin(), tail.end());
        if (kind == 1) sessions[session] = tokens;
        serve(tokens);
        mix(static_cast<uint64_t>(r));
      }
      if (summary_.ok) {
        cache_->flush();
        check("quiescence");
      }
    } catch (const AssertionFailure& e) {
      fail(std::string("core.assert: ") + e.what());
    }
    const HiCacheStats& stats = cache_->stats();
    summary_.load_back_tokens = stats.load_back_tokens;
    summary_.evicted_device_tokens = stats.evicted_device_tokens;
    return summary_;
  }

 private:
  std::vector<Token> random_tokens(uint64_t n) {
    std::vector<Token> t(n);
    for (Token& x : t)
      x = static_cast<Token>(rng_.below(50000));
    return t;
  }

  void mix(uint64_t v) {
    summary_.event_log_hash = (summary_.event_log_hash ^ v) * 1099511628211ull;
  }

  void fail(std::string what) {
    if (!summary_.ok) return;
    summary_.ok = false;
    summary_.violation = std::move(what);
  }

  void check(const char* where) {
    ++summary_.step;
    SanityReport report;
    cache_->sanity_check(report);
    if (!report.ok()) fail(report.summary() + " (after " + where + ")");
  }

  // Advances streams and polls acks in a seed-chosen order.
  void churn() {
    const uint64_t moves = rng_.below(6);
    for (uint64_t i = 0; i < moves; ++i) {
      const auto stream = static_cast<StreamId>(rng_.below(backend_.stream_count()));
      mix(backend_.step(stream) ? stream + 1 : 0);
    }
    if (rng_.below(2) == 0) cache_->check_hicache_events();
    check("churn");
  }

  void forward(std::span<const Token> tokens, const IndexVector& slots, size_t begin) {
    DeviceKVPool& pool = cache_->device_pool();
    LayerDoneCounter& counter = cache_->controller().layer_done_counter();
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      counter.wait_until(backend_, backend_.compute_stream(), layer);
      for (size_t i = 0; i < slots.size(); ++i) {
        pool.write_item_async(backend_.compute_stream(), layer, slots[i],
                              expected_item(0, tokens, begin + i, layer, pool.item_bytes()));
      }
    }
  }

  void verify(std::span<const Token> tokens, const IndexVector& slots) {
    DeviceKVPool& pool = cache_->device_pool();
    for (size_t i = 0; i < slots.size() && summary_.ok; ++i) {
      for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
        if (pool.read_item_sync(layer, slots[i]) !=
            expected_item(0, tokens, i, layer, pool.item_bytes())) {
          fail("content: position " + std::to_string(i) + " layer " + std::to_string(layer) +
               " holds another prefix's KV (slot " + std::to_string(slots[i]) + ")");
          return;
        }
      }
    }
  }

  void serve(const std::vector<Token>& tokens) {
    churn();
    MatchResult m = cache_->match_prefix(0, tokens);
    summary_.prompt_tokens += static_cast<int64_t>(tokens.size());
    summary_.device_hit_tokens += m.device_hit_length();
    summary_.host_hit_tokens += m.host_hit_length;
    mix(static_cast<uint64_t>(m.device_hit_length()) << 20 |
        static_cast<uint64_t>(m.host_hit_length));
    LockRecord lock = cache_->lock(*m.best_match_node);
    IndexVector prefix = m.device_indices;
    if (m.host_hit_length > 0) {
      LoadBackResult r = cache_->init_load_back(*m.best_match_node);
      prefix.append(r.device_indices);
      cache_->controller().layer_done_counter().set_consumer(cache_->ready_to_load_host_cache());
    }
    check("admission");
    churn();
    const size_t page = static_cast<size_t>(cache_->options().page_size);
    const size_t cached = prefix.size();
    const size_t need = (tokens.size() - cached + page - 1) / page * page;
    std::optional<IndexVector> fresh = need > 0 ? cache_->alloc_device(static_cast<int64_t>(need))
                                                : IndexVector(Tier::kDevice, {});
    if (!fresh) {  // does not fit even after eviction: drop the request
      cache_->unlock(lock);
      check("drop");
      return;
    }
    forward(tokens, fresh->slice(0, std::min(fresh->size(), tokens.size() - cached)), cached);
    verify(tokens, prefix);  // what the model reads must be this prefix's KV
    IndexVector all = prefix;
    all.append(*fresh);
    InsertResult ins = cache_->insert(0, tokens, all);
    const size_t aligned = tokens.size() / page * page;
    std::vector<SlotIndex> dup;
    for (size_t i = cached; i < static_cast<size_t>(ins.prefix_len); ++i)
      dup.push_back(all[i]);
    for (size_t i = aligned; i < all.size(); ++i)
      dup.push_back(all[i]);
    if (!dup.empty()) cache_->free_device(IndexVector(Tier::kDevice, std::move(dup)));
    cache_->unlock(lock);
    ++summary_.requests_done;
    check("finish");
  }

  SmokeOptions options_;
  Rng rng_;
  CpuBackend backend_;
  std::unique_ptr<HiCache> cache_;
  SmokeSummary summary_;
};

}  // namespace

SmokeOptions default_smoke_options() {
  SmokeOptions o;
  o.cache = HiCacheOptions{.page_size = 4,
                           .layer_count = 2,
                           .item_bytes = 16,
                           .device_tokens = 512,
                           .host_tokens = 1024};
  return o;
}

SmokeSummary run_smoke(const SmokeOptions& options) {
  return Driver(options).run();
}

}  // namespace kvsim::sim
