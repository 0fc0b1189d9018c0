#include "sim/campaign/shrink.h"

#include <algorithm>
#include <set>
#include <utility>

#include "sim/campaign/runner.h"
#include "sim/config/scenario.h"

namespace kvsim::sim {
namespace {

// The site of a failure: for assertions "file:line", for content failures the pool read.
std::string site(const SimViolation& v) {
  if (v.invariant != "core.assert" && v.invariant != "content") return "";
  const size_t colon = v.detail.find(':');
  if (v.invariant == "content") return v.detail.substr(0, colon);
  const size_t second = colon == std::string::npos ? colon : v.detail.find(':', colon + 1);
  return v.detail.substr(0, second);
}

bool uses_rid(OpKind k) {
  return k != OpKind::kPoll && k != OpKind::kStep && k != OpKind::kStorage && k != OpKind::kTick &&
         k != OpKind::kFlush && k != OpKind::kLiveness && k != OpKind::kInject &&
         k != OpKind::kStartLoads;
}

class Shrinker {
 public:
  Shrinker(const OpTrace& t, const ShrinkOptions& o) : base_(t), options_(o) {}

  ShrinkResult run() {
    ShrinkResult result;
    result.original_ops = base_.ops.size();
    const RunResult first = replay(base_.ops);
    if (!first.violation) {
      result.trace = base_;
      result.replays = replays_;
      return result;
    }
    target_ = *first.violation;
    result.reproduced = true;
    std::vector<Op> ops = base_.ops;
    ops.resize(std::min(ops.size(), target_.op_index));  // nothing after the failure matters
    if (!fails(ops)) ops = base_.ops;
    for (bool changed = true; changed && budget_left();) {
      const size_t before = size_of(ops);
      const Scenario config_before = base_.scenario;
      shrink_pools(ops);  // first: with more requests left, smaller pools still fail
      drop_requests(ops);
      drop_kinds(ops);
      ddmin(ops);
      drop_windows(ops, 2);
      drop_windows(ops, 3);
      merge_adjacent(ops);
      simplify(ops);
      changed = size_of(ops) < before || to_json(base_.scenario) != to_json(config_before);
    }
    // Candidates may hold ops that no longer apply (replay skips them); the written trace
    // holds only ops that apply, with their hash chain, so it replays strictly.
    OpTrace t = base_;
    t.ops = ops;
    result.trace = strict_trace(t, options_.setup);
    replays_ += 2;
    result.replays = replays_;
    return result;
  }

 private:
  bool budget_left() const {
    return replays_ < options_.max_replays &&
           (options_.max_replay_ops == 0 || replayed_ops_ < options_.max_replay_ops);
  }

  RunResult replay(const std::vector<Op>& ops) {
    ++replays_;
    replayed_ops_ += ops.size();
    OpTrace t = base_;
    t.ops = ops;
    return replay_ops(t, options_.setup);
  }

  bool fails(const std::vector<Op>& ops) {
    if (!budget_left()) return false;
    const RunResult r = replay(ops);
    return r.violation && same_failure(target_, *r.violation);
  }

  // Ops plus the tokens they carry: what "smaller" means.
  static size_t size_of(const std::vector<Op>& ops) {
    size_t n = ops.size() * 1000;
    for (const Op& op : ops)
      n += op.prompt.size() + static_cast<size_t>(std::max<int64_t>(op.n, 0) % 1000);
    return n;
  }

  void drop_requests(std::vector<Op>& ops) {
    std::set<RequestId> rids;
    for (const Op& op : ops) {
      if (uses_rid(op.kind)) rids.insert(op.rid);
    }
    for (RequestId rid : rids) {
      std::vector<Op> candidate;
      for (const Op& op : ops) {
        if (!uses_rid(op.kind) || op.rid != rid) candidate.push_back(op);
      }
      if (candidate.size() < ops.size() && fails(candidate)) ops = std::move(candidate);
    }
  }

  void ddmin(std::vector<Op>& ops) {
    size_t n = 2;
    while (ops.size() >= 2 && budget_left()) {
      const size_t chunk = (ops.size() + n - 1) / n;
      bool reduced = false;
      // Try removing each chunk (testing its complement), last chunks first: late ops are
      // more often irrelevant.
      for (size_t i = n; i-- > 0 && !reduced;) {
        const size_t begin = i * chunk;
        if (begin >= ops.size()) continue;
        const size_t end = std::min(ops.size(), begin + chunk);
        std::vector<Op> candidate(ops.begin(), ops.begin() + static_cast<ptrdiff_t>(begin));
        candidate.insert(candidate.end(), ops.begin() + static_cast<ptrdiff_t>(end), ops.end());
        if (fails(candidate)) {
          ops = std::move(candidate);
          n = std::max<size_t>(n - 1, 2);
          reduced = true;
        }
      }
      if (reduced) continue;
      if (n >= ops.size()) break;
      n = std::min(ops.size(), n * 2);
    }
  }

  // Two or three adjacent ops that only go together (an inject op and the op it arms, an
  // arrival and its admission, a step and the poll that consumes its ack, a storage step with
  // its poll and tick): ddmin's removals, aligned to its chunks, miss most such windows. Every
  // window position, last first.
  void drop_windows(std::vector<Op>& ops, size_t width) {
    for (size_t end = ops.size(); end >= width && budget_left(); --end) {
      if (end > ops.size()) continue;
      const size_t begin = end - width;
      std::vector<Op> candidate(ops.begin(), ops.begin() + static_cast<ptrdiff_t>(begin));
      candidate.insert(candidate.end(), ops.begin() + static_cast<ptrdiff_t>(end), ops.end());
      if (fails(candidate)) ops = std::move(candidate);
    }
  }

  // Every op of one kind at once (all ticks, all polls, all storage steps of one worker): a
  // failure that needs none of them loses them in one replay instead of one each.
  void drop_kinds(std::vector<Op>& ops) {
    std::set<std::pair<OpKind, uint32_t>> kinds;
    for (const Op& op : ops) {
      if (op.kind != OpKind::kArrive) kinds.insert({op.kind, op.target});
    }
    for (const auto& [kind, target] : kinds) {
      if (!budget_left()) return;
      std::vector<Op> candidate;
      for (const Op& op : ops) {
        if (op.kind != kind || op.target != target) candidate.push_back(op);
      }
      if (candidate.size() < ops.size() && fails(candidate)) ops = std::move(candidate);
    }
  }

  // Runs of one kind that one op can do: steps of one stream become one step of the summed
  // count; of consecutive ticks (absolute times) the last is enough.
  void merge_adjacent(std::vector<Op>& ops) {
    for (size_t i = 0; i + 1 < ops.size() && budget_left();) {
      const Op& a = ops[i];
      const Op& b = ops[i + 1];
      std::vector<Op> candidate;
      if (a.kind == OpKind::kStep && b.kind == OpKind::kStep && a.target == b.target) {
        candidate = ops;
        candidate[i].n = a.n + b.n;
        candidate.erase(candidate.begin() + static_cast<ptrdiff_t>(i + 1));
      } else if (a.kind == OpKind::kTick && b.kind == OpKind::kTick) {
        candidate = ops;
        candidate.erase(candidate.begin() + static_cast<ptrdiff_t>(i));
      }
      if (!candidate.empty() && fails(candidate)) {
        ops = std::move(candidate);  // the merged op may merge with the next one too
      } else {
        ++i;
      }
    }
  }

  void simplify(std::vector<Op>& ops) {
    // ops[i] is re-read after every accepted candidate: the vector is replaced each time.
    for (size_t i = 0; i < ops.size() && budget_left(); ++i) {
      if (ops[i].kind == OpKind::kArrive) {
        while (ops[i].prompt.size() > 1 && budget_left()) {
          std::vector<Op> candidate = ops;
          candidate[i].prompt.resize(ops[i].prompt.size() / 2);
          if (!fails(candidate)) break;
          ops = std::move(candidate);
        }
        while (ops[i].output_len > 1 && budget_left()) {
          std::vector<Op> candidate = ops;
          candidate[i].output_len = ops[i].output_len / 2;
          if (!fails(candidate)) break;
          ops = std::move(candidate);
        }
      } else if (ops[i].kind == OpKind::kStep && ops[i].n > 1) {
        std::vector<Op> candidate = ops;
        candidate[i].n = 1;
        if (fails(candidate)) ops = std::move(candidate);
      }
    }
  }

  // Smaller pools reach the same pressure with fewer requests: halve each pool while the
  // failure stays (page multiples, at least one page).
  void shrink_pools(const std::vector<Op>& ops) {
    const int64_t page = base_.scenario.cache.page_size;
    for (int64_t HiCacheOptions::*field :
         {&HiCacheOptions::host_tokens, &HiCacheOptions::device_tokens}) {
      while (budget_left()) {
        const int64_t now = base_.scenario.cache.*field;
        const int64_t half = now / 2 / page * page;
        if (half < page) break;
        const Scenario kept = base_.scenario;
        base_.scenario.cache.*field = half;
        if (!fails(ops)) {
          base_.scenario = kept;
          break;
        }
      }
    }
  }

  OpTrace base_;
  ShrinkOptions options_;
  SimViolation target_;
  size_t replays_ = 0;
  size_t replayed_ops_ = 0;
};

}  // namespace

bool same_failure(const SimViolation& target, const SimViolation& v) {
  return target.invariant == v.invariant && site(target) == site(v);
}

OpTrace strict_trace(const OpTrace& trace, const ExecutorSetup& setup) {
  OpTrace t = trace;
  t.checks.clear();
  ReplayReport last = replay_trace(t, {.setup = setup, .stop_at_problem = false});
  const std::optional<SimViolation> target = last.result.violation;
  if (last.rejected > 0) {
    OpTrace kept = t;
    kept.ops.clear();
    for (size_t i = 0; i < t.ops.size(); ++i) {
      if (i >= last.applied.size() || last.applied[i]) kept.ops.push_back(t.ops[i]);
    }
    ReplayReport again = replay_trace(kept, {.setup = setup, .stop_at_problem = false});
    const bool same = target.has_value() == again.result.violation.has_value() &&
                      (!target || same_failure(*target, *again.result.violation));
    if (!same) return trace;
    t = std::move(kept);
    last = std::move(again);
  }
  t.violation = last.result.violation;
  t.event_hash = last.result.event_hash;
  t.ticks = last.result.ticks;
  if (last.rejected == 0) t.checks = last.checks;
  t.lines.clear();
  t.source.clear();
  t.declared_ops = -1;
  if (t.ops.size() != trace.ops.size()) t.faults_fired.reset();  // not the recording's ops now
  return t;
}

ShrinkResult shrink_trace(const OpTrace& failing, const ShrinkOptions& options) {
  return Shrinker(failing, options).run();
}

}  // namespace kvsim::sim
