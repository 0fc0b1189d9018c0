#include "sim/workload.h"

#include <cmath>

#include "sim/mooncake.h"
#include "sim/rng.h"

namespace kvsim::sim {
namespace {

constexpr Token kVocab = kPromptVocab;

// `n` generated tokens, appended to `out`, and the recipe segment that reproduces them.
PromptSegment random_tokens(Rng& rng, int64_t n, std::vector<Token>& out) {
  PromptSegment seg{.kind = PromptSegment::Kind::kRng, .value = rng.state(), .n = n};
  for (int64_t i = 0; i < n; ++i)
    out.push_back(static_cast<Token>(rng.below(kVocab)));
  return seg;
}

// The generator, streamed: its state is the system prompts and the sessions' histories (both
// bounded by the scenario's knobs), never the requests already produced.
class Generator final : public ArrivalSource {
 public:
  Generator(const Scenario& s, uint64_t seed) : w_(s.workload), rng_(rng_stream(seed, "workload")) {
    for (int64_t i = 0; i < w_.system_prompts; ++i) {
      std::vector<Token> t;
      const PromptSegment seg = random_tokens(rng_, w_.system_prompt_tokens, t);
      prompts_.push_back({Tokens(std::move(t)), seg});
    }
    sessions_.resize(static_cast<size_t>(w_.sessions));
    for (Session& session : sessions_)
      session.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
  }

  bool next(Arrival& a) override {
    if (produced_ >= w_.requests) return false;
    a = Arrival{};
    a.rid = static_cast<RequestId>(++produced_);
    // Exponential inter-arrival times: a Poisson process of the given rate.
    const double u = (static_cast<double>(rng_.next() >> 11) + 1.0) / 9007199254740993.0;
    time_ += -std::log(u) / w_.arrival_rate;
    a.tick = static_cast<uint64_t>(time_);
    a.output_len = rng_.between(w_.output_min, w_.output_max);
    WorkloadKind kind = w_.kind;
    if (kind == WorkloadKind::kMixed) kind = static_cast<WorkloadKind>(1 + rng_.below(4));
    fill(kind, a);
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

  int64_t fresh() { return rng_.between(w_.prompt_min, w_.prompt_max); }

  void fill(WorkloadKind kind, Arrival& a) {
    std::vector<Token> prompt;
    switch (kind) {
      case WorkloadKind::kSharedPrompt: {
        const size_t p = rng_.below(prompts_.size());
        a.ns = p % static_cast<size_t>(w_.namespaces);
        const int64_t n = fresh();
        prompt.reserve(prompts_[p].tokens.size() + static_cast<size_t>(n));
        prompt = prompts_[p].tokens.vec();
        a.recipe = {prompts_[p].segment, random_tokens(rng_, n, prompt)};
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
        a.recipe.push_back(random_tokens(rng_, turn, prompt));
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
      case WorkloadKind::kUniform:
      case WorkloadKind::kMixed:
      case WorkloadKind::kMooncake: {
        a.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
        const int64_t n = fresh();
        prompt.reserve(static_cast<size_t>(n));
        a.recipe = {random_tokens(rng_, n, prompt)};
        break;
      }
    }
    a.prompt = Tokens(std::move(prompt));
  }

  const WorkloadOptions& w_;
  Rng rng_;
  int64_t produced_ = 0;
  double time_ = 0;
  std::vector<SystemPrompt> prompts_;
  std::vector<Session> sessions_;
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
