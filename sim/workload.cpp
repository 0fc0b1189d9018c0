#include "sim/workload.h"

#include <cmath>

#include "sim/mooncake.h"
#include "sim/rng.h"

namespace kvsim::sim {
namespace {

constexpr Token kVocab = 50000;

std::vector<Token> random_tokens(Rng& rng, int64_t n) {
  std::vector<Token> t(static_cast<size_t>(n));
  for (Token& x : t)
    x = static_cast<Token>(rng.below(kVocab));
  return t;
}

void append(std::vector<Token>& a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

class Generator {
 public:
  Generator(const Scenario& s, uint64_t seed) : w_(s.workload), rng_(rng_stream(seed, "workload")) {
    for (int64_t i = 0; i < w_.system_prompts; ++i)
      prompts_.push_back(random_tokens(rng_, w_.system_prompt_tokens));
    sessions_.resize(static_cast<size_t>(w_.sessions));
    session_ns_.resize(sessions_.size());
    for (Namespace& ns : session_ns_)
      ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
  }

  std::vector<Arrival> run() {
    std::vector<Arrival> out;
    double time = 0;
    for (int64_t r = 0; r < w_.requests; ++r) {
      Arrival a;
      a.rid = static_cast<RequestId>(r + 1);
      // Exponential inter-arrival times: a Poisson process of the given rate.
      const double u = (static_cast<double>(rng_.next() >> 11) + 1.0) / 9007199254740993.0;
      time += -std::log(u) / w_.arrival_rate;
      a.tick = static_cast<uint64_t>(time);
      a.output_len = rng_.between(w_.output_min, w_.output_max);
      WorkloadKind kind = w_.kind;
      if (kind == WorkloadKind::kMixed) kind = static_cast<WorkloadKind>(1 + rng_.below(4));
      fill(kind, a);
      out.push_back(std::move(a));
    }
    return out;
  }

 private:
  int64_t fresh() { return rng_.between(w_.prompt_min, w_.prompt_max); }

  void fill(WorkloadKind kind, Arrival& a) {
    switch (kind) {
      case WorkloadKind::kSharedPrompt: {
        const size_t p = rng_.below(prompts_.size());
        a.ns = p % static_cast<size_t>(w_.namespaces);
        a.prompt = prompts_[p];
        append(a.prompt, random_tokens(rng_, fresh()));
        return;
      }
      case WorkloadKind::kMultiTurn:
      case WorkloadKind::kAgentic: {
        const size_t s = rng_.below(sessions_.size());
        std::vector<Token>& history = sessions_[s];
        // The prompt never exceeds `cap` (validate() sizes the device pool from it): a turn
        // that would make it longer starts a new conversation.
        const int64_t cap = kind == WorkloadKind::kAgentic ? 4 * w_.prompt_max : 2 * w_.prompt_max;
        const int64_t turn = kind == WorkloadKind::kAgentic ? fresh() / 2 + 1 : fresh();
        if (static_cast<int64_t>(history.size()) + turn > cap) history.clear();
        a.ns = session_ns_[s];
        a.prompt = history;
        append(a.prompt, random_tokens(rng_, turn));
        history = a.prompt;
        for (int64_t i = 0; i < a.output_len; ++i)
          history.push_back(output_token(a.rid, static_cast<size_t>(i)));
        return;
      }
      case WorkloadKind::kUniform:
      case WorkloadKind::kMixed:
      case WorkloadKind::kMooncake:
        a.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
        a.prompt = random_tokens(rng_, fresh());
        return;
    }
  }

  const WorkloadOptions& w_;
  Rng rng_;
  std::vector<std::vector<Token>> prompts_;
  std::vector<std::vector<Token>> sessions_;
  std::vector<Namespace> session_ns_;
};

}  // namespace

Token output_token(RequestId rid, size_t i) {
  Rng r(rid * 0x9E3779B97F4A7C15ull + i);
  return static_cast<Token>(r.below(kVocab));
}

std::vector<Arrival> generate_workload(const Scenario& scenario, uint64_t seed) {
  if (scenario.workload.kind == WorkloadKind::kMooncake) {
    return import_mooncake(scenario.workload.trace_path, scenario.workload.block_tokens,
                           scenario.workload.ms_per_tick, scenario.workload.requests);
  }
  return Generator(scenario, seed).run();
}

}  // namespace kvsim::sim
