#include "sim/workload.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "sim/mooncake.h"
#include "sim/rng.h"

namespace kvsim::sim {
namespace {

constexpr Token kVocab = 50000;  // output tokens (output_token) and the default prompt vocabulary

std::vector<Token> random_tokens(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<Token> t(static_cast<size_t>(n));
  for (Token& x : t)
    x = static_cast<Token>(rng.below(static_cast<uint64_t>(vocab)));
  return t;
}

// Forks draw their source from the last this many sequences (any generator's).
constexpr size_t kForkSources = 64;

void append(std::vector<Token>& a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

class Generator {
 public:
  Generator(const Scenario& s, uint64_t seed) : w_(s.workload), rng_(rng_stream(seed, "workload")) {
    for (int64_t i = 0; i < w_.system_prompts; ++i)
      prompts_.push_back(random_tokens(rng_, w_.system_prompt_tokens, w_.vocab));
    sessions_.resize(static_cast<size_t>(w_.sessions));
    session_ns_.resize(sessions_.size());
    for (Namespace& ns : session_ns_)
      ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
  }

  std::vector<Arrival> run() {
    std::vector<Arrival> out;
    double time = 0;
    int64_t burst_left = 0;
    for (int64_t r = 0; r < w_.requests; ++r) {
      Arrival a;
      a.rid = static_cast<RequestId>(r + 1);
      if (burst_left == 0) {
        // Exponential inter-arrival times: a Poisson process of the given rate (of bursts).
        const double u = (static_cast<double>(rng_.next() >> 11) + 1.0) / 9007199254740993.0;
        time += -std::log(u) / w_.arrival_rate;
        burst_left = w_.burst > 1 ? rng_.between(1, w_.burst) : 1;
      }
      --burst_left;
      a.tick = static_cast<uint64_t>(time);
      a.output_len = rng_.between(w_.output_min, w_.output_max);
      WorkloadKind kind = w_.kind;
      if (kind == WorkloadKind::kMixed) kind = static_cast<WorkloadKind>(1 + rng_.below(4));
      if (kind == WorkloadKind::kAdversarial) {
        const uint64_t k = rng_.below(5);
        kind = k == 4 ? WorkloadKind::kFork : static_cast<WorkloadKind>(1 + k);
      }
      fill(kind, a);
      remember(a);
      out.push_back(std::move(a));
    }
    return out;
  }

 private:
  int64_t fresh() { return rng_.between(w_.prompt_min, w_.prompt_max); }
  std::vector<Token> tokens(int64_t n) { return random_tokens(rng_, n, w_.vocab); }
  Namespace any_namespace() { return rng_.below(static_cast<uint64_t>(w_.namespaces)); }

  // A fork's source: the sequence as the tree caches it after the request (prompt + outputs).
  // Only fork and adversarial workloads keep them (the other generators never read them).
  void remember(const Arrival& a) {
    if (w_.kind != WorkloadKind::kFork && w_.kind != WorkloadKind::kAdversarial) return;
    Source s{a.ns, a.prompt};
    for (int64_t i = 0; i < a.output_len; ++i)
      s.tokens.push_back(output_token(a.rid, static_cast<size_t>(i)));
    sources_.push_back(std::move(s));
    if (sources_.size() > kForkSources) sources_.pop_front();
  }

  void fill(WorkloadKind kind, Arrival& a) {
    switch (kind) {
      case WorkloadKind::kSharedPrompt: {
        const size_t p = rng_.below(prompts_.size());
        a.ns = w_.cross_namespace ? any_namespace() : p % static_cast<size_t>(w_.namespaces);
        a.prompt = prompts_[p];
        append(a.prompt, tokens(fresh()));
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
        append(a.prompt, tokens(turn));
        history = a.prompt;
        for (int64_t i = 0; i < a.output_len; ++i)
          history.push_back(output_token(a.rid, static_cast<size_t>(i)));
        return;
      }
      case WorkloadKind::kFork: {
        // Diverge from a cached sequence at any token: inside a node, off page boundaries.
        // The prompt stays within what validate() sizes the device pool for.
        const int64_t cap = w_.system_prompt_tokens + 4 * w_.prompt_max;
        const int64_t turn = fresh();
        if (sources_.empty()) {
          a.ns = any_namespace();
          a.prompt = tokens(turn);
          return;
        }
        const Source& src = sources_[rng_.below(sources_.size())];
        const auto len = static_cast<int64_t>(src.tokens.size());
        const int64_t offset = std::min(rng_.between(1, std::max<int64_t>(1, len - 1)), cap - turn);
        a.ns = w_.cross_namespace && rng_.chance(0.5) ? any_namespace() : src.ns;
        a.prompt.assign(src.tokens.begin(), src.tokens.begin() + std::max<int64_t>(offset, 0));
        append(a.prompt, tokens(turn));
        return;
      }
      case WorkloadKind::kUniform:
      case WorkloadKind::kMixed:
      case WorkloadKind::kMooncake:
      case WorkloadKind::kAdversarial:
        a.ns = rng_.below(static_cast<uint64_t>(w_.namespaces));
        a.prompt = tokens(fresh());
        return;
    }
  }

  const WorkloadOptions& w_;
  Rng rng_;
  std::vector<std::vector<Token>> prompts_;
  std::vector<std::vector<Token>> sessions_;
  std::vector<Namespace> session_ns_;
  struct Source {
    Namespace ns = 0;
    std::vector<Token> tokens;
  };
  std::deque<Source> sources_;
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
