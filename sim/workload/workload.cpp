#include "sim/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "sim/base/rng.h"
#include "sim/workload/mooncake.h"
#include "sim/workload/page_mosaic.h"

namespace kvsim::sim {
namespace {

constexpr Token kVocab = kPromptVocab;

// `n` generated tokens below `vocab`, appended to `out`, and the recipe segment that
// reproduces them.
PromptSegment random_tokens(Rng& rng, int64_t n, int64_t vocab, std::vector<Token>& out) {
  PromptSegment seg{
      .kind = PromptSegment::Kind::kRng, .value = rng.state(), .n = n, .vocab = vocab};
  for (int64_t i = 0; i < n; ++i)
    out.push_back(static_cast<Token>(rng.below(static_cast<uint64_t>(vocab))));
  return seg;
}

// Forks draw their source from the last this many sequences (any generator's).
constexpr size_t kForkSources = 64;

// The generator, streamed: its state is the system prompts and the sessions' histories (both
// bounded by the scenario's knobs), never the requests already produced.
class Generator final : public ArrivalSource {
 public:
  Generator(const Scenario& s, uint64_t seed) : w_(s.workload), rng_(rng_stream(seed, "workload")) {
    for (int64_t i = 0; i < w_.system_prompts; ++i) {
      std::vector<Token> t;
      const PromptSegment seg = random_tokens(rng_, w_.system_prompt_tokens, w_.vocab, t);
      prompts_.push_back({Tokens(std::move(t)), seg});
    }
    sessions_.resize(static_cast<size_t>(w_.sessions));
    for (Session& session : sessions_)
      session.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
    // Only page mosaics draw an alphabet (no other kind's draws move).
    if (w_.kind == WorkloadKind::kPageMosaic) mosaic_.emplace(w_, s.cache.page_size, rng_);
  }

  bool next(Arrival& a) override {
    if (produced_ >= w_.requests) return false;
    a = Arrival{};
    a.rid = static_cast<RequestId>(++produced_);
    // A page mosaic's family arrives on one tick (no draw otherwise).
    const bool family = mosaic_ && mosaic_->family_pending();
    if (burst_left_ == 0 && !family) {
      // Exponential inter-arrival times: a Poisson process of the given rate (of bursts).
      const double u = (static_cast<double>(rng_.next() >> 11) + 1.0) / 9007199254740993.0;
      time_ += -std::log(u) / w_.arrival_rate;
      burst_left_ = w_.burst > 1 ? rng_.between(1, w_.burst) : 1;  // no draw by default
    }
    if (!family) --burst_left_;
    a.tick = static_cast<uint64_t>(time_);
    a.output_len = rng_.between(w_.output_min, w_.output_max);
    WorkloadKind kind = w_.kind;
    if (kind == WorkloadKind::kMixed) kind = static_cast<WorkloadKind>(1 + rng_.below(4));
    if (kind == WorkloadKind::kAdversarial) {
      const uint64_t k = rng_.below(5);
      kind = k == 4 ? WorkloadKind::kFork : static_cast<WorkloadKind>(1 + k);
    }
    fill(kind, a);
    remember(a);  // a fork's source keeps the namespace's index
    if (w_.wide_namespace_ids && a.ns != 0) a.ns = wide_namespace_id(a.ns);
    return true;
  }

 private:
  struct SystemPrompt {
    Tokens tokens;
    PromptSegment segment;
  };
  struct Session {
    Namespace ns = 0;
    std::vector<Token> history;
    PromptRecipe recipe;  // of history
  };

  struct Source {  // a fork's source: a sequence as the tree caches it (prompt + outputs)
    Namespace ns = 0;
    std::vector<Token> tokens;
    PromptRecipe recipe;
  };

  // Namespace index i > 0 as a 63-bit id (splitmix64's finalizer: a bijection, so distinct
  // indices stay distinct; the top bit cleared, as traces hold ids up to INT64_MAX).
  static Namespace wide_namespace_id(Namespace i) {
    uint64_t z = i + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const Namespace id = z & 0x7FFFFFFFFFFFFFFFull;
    return id == 0 ? i : id;
  }
  int64_t fresh() { return rng_.between(w_.prompt_min, w_.prompt_max); }
  PromptSegment tokens(int64_t n, std::vector<Token>& out) {
    return random_tokens(rng_, n, w_.vocab, out);
  }
  Namespace any_namespace() { return rng_.below(static_cast<uint64_t>(w_.namespaces)); }

  // Only fork and adversarial workloads keep sources (the other generators never read them).
  void remember(const Arrival& a) {
    if (w_.kind != WorkloadKind::kFork && w_.kind != WorkloadKind::kAdversarial) return;
    Source s{a.ns, a.prompt.vec(), a.recipe};
    for (int64_t i = 0; i < a.output_len; ++i)
      s.tokens.push_back(output_token(a.rid, static_cast<size_t>(i)));
    if (a.output_len > 0) {
      s.recipe.push_back({.kind = PromptSegment::Kind::kOutputs,
                          .value = static_cast<uint64_t>(a.rid),
                          .n = a.output_len});
    }
    sources_.push_back(std::move(s));
    if (sources_.size() > kForkSources) sources_.pop_front();
  }

  void fill(WorkloadKind kind, Arrival& a) {
    std::vector<Token> prompt;
    switch (kind) {
      case WorkloadKind::kSharedPrompt: {
        const size_t p = rng_.below(prompts_.size());
        a.ns = w_.cross_namespace ? any_namespace() : p % static_cast<size_t>(w_.namespaces);
        const int64_t n = fresh();
        prompt.reserve(prompts_[p].tokens.size() + static_cast<size_t>(n));
        prompt = prompts_[p].tokens.vec();
        a.recipe = {prompts_[p].segment, tokens(n, prompt)};
        break;
      }
      case WorkloadKind::kMultiTurn:
      case WorkloadKind::kAgentic: {
        Session& session = sessions_[rng_.below(sessions_.size())];
        // The prompt never exceeds `cap` (validate() sizes the device pool from it): a turn
        // that would make it longer starts a new conversation.
        const int64_t cap = kind == WorkloadKind::kAgentic ? 4 * w_.prompt_max : 2 * w_.prompt_max;
        const int64_t turn = kind == WorkloadKind::kAgentic ? fresh() / 2 + 1 : fresh();
        if (static_cast<int64_t>(session.history.size()) + turn > cap) {
          session.history.clear();
          session.recipe.clear();
        }
        a.ns = session.ns;
        prompt.reserve(session.history.size() + static_cast<size_t>(turn));
        prompt = session.history;
        a.recipe = session.recipe;
        a.recipe.push_back(tokens(turn, prompt));
        session.history = prompt;
        session.recipe = a.recipe;
        for (int64_t i = 0; i < a.output_len; ++i)
          session.history.push_back(output_token(a.rid, static_cast<size_t>(i)));
        if (a.output_len > 0) {
          session.recipe.push_back({.kind = PromptSegment::Kind::kOutputs,
                                    .value = static_cast<uint64_t>(a.rid),
                                    .n = a.output_len});
        }
        break;
      }
      case WorkloadKind::kFork: {
        // Diverge from a cached sequence at any token: inside a node, off page boundaries.
        // The prompt stays within what validate() sizes the device pool for.
        const int64_t cap = w_.system_prompt_tokens + 4 * w_.prompt_max;
        const int64_t turn = fresh();
        if (sources_.empty()) {
          a.ns = any_namespace();
          a.recipe = {tokens(turn, prompt)};
          break;
        }
        const Source& src = sources_[rng_.below(sources_.size())];
        const auto len = static_cast<int64_t>(src.tokens.size());
        const int64_t offset = std::max<int64_t>(
            0, std::min(rng_.between(1, std::max<int64_t>(1, len - 1)), cap - turn));
        a.ns = w_.cross_namespace && rng_.chance(0.5) ? any_namespace() : src.ns;
        prompt.assign(src.tokens.begin(), src.tokens.begin() + offset);
        a.recipe = recipe_prefix(src.recipe, offset);
        a.recipe.push_back(tokens(turn, prompt));
        break;
      }
      case WorkloadKind::kPageMosaic:
        mosaic_->fill(rng_, a, prompt);
        break;
      case WorkloadKind::kUniform:
      case WorkloadKind::kMixed:
      case WorkloadKind::kMooncake:
      case WorkloadKind::kAdversarial: {
        a.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
        const int64_t n = fresh();
        prompt.reserve(static_cast<size_t>(n));
        a.recipe = {tokens(n, prompt)};
        break;
      }
    }
    a.prompt = Tokens(std::move(prompt));
  }

  const WorkloadOptions& w_;
  Rng rng_;
  int64_t produced_ = 0;
  double time_ = 0;
  int64_t burst_left_ = 0;
  std::vector<SystemPrompt> prompts_;
  std::deque<Source> sources_;
  std::vector<Session> sessions_;
  std::optional<PageMosaic> mosaic_;
};

class ListSource final : public ArrivalSource {
 public:
  explicit ListSource(const std::vector<Arrival>& list) : list_(list) {}
  bool next(Arrival& out) override {
    if (next_ >= list_.size()) return false;
    const Arrival& a = list_[next_++];
    out.rid = a.rid;
    out.tick = a.tick;
    out.ns = a.ns;
    out.prompt = prompt_of(a);  // expanded now, when it arrives
    out.recipe.clear();
    out.output_len = a.output_len;
    out.abort_at = a.abort_at;
    out.reported = a.reported;
    return true;
  }

 private:
  const std::vector<Arrival>& list_;
  size_t next_ = 0;
};

}  // namespace

Token output_token(RequestId rid, size_t i) {
  Rng r(rid * 0x9E3779B97F4A7C15ull + i);
  return static_cast<Token>(r.below(kVocab));
}

Tokens prompt_of(const Arrival& a) {
  return a.prompt.empty() ? expand_recipe(a.recipe) : a.prompt;
}

std::unique_ptr<ArrivalSource> workload_source(const Scenario& scenario, uint64_t seed) {
  if (scenario.workload.kind == WorkloadKind::kMooncake) {
    return mooncake_source(scenario.workload.trace_path, scenario.workload.block_tokens,
                           scenario.workload.ms_per_tick, scenario.workload.requests);
  }
  return std::make_unique<Generator>(scenario, seed);
}

std::unique_ptr<ArrivalSource> list_source(const std::vector<Arrival>& arrivals) {
  return std::make_unique<ListSource>(arrivals);
}

std::vector<Arrival> generate_workload(const Scenario& scenario, uint64_t seed) {
  std::vector<Arrival> out;
  std::unique_ptr<ArrivalSource> source = workload_source(scenario, seed);
  Arrival a;
  while (source->next(a))
    out.push_back(std::move(a));
  return out;
}

}  // namespace kvsim::sim
