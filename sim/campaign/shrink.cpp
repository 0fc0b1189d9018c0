#include "sim/campaign/shrink.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"
#include "sim/config/scenario.h"

namespace kvsim::sim {

std::string sglang_exception_site(const std::string& detail) {
  // "<Type>: <message> at <file>:<line> (<function>)" (python/kvsim/sglang_target/driver_checks.py,
  // _exception_violation): the type and the frame, not the message (it carries sizes and ids
  // that change as the trace shrinks).
  const size_t colon = detail.find(':');
  const size_t at = detail.rfind(" at ");
  if (colon == std::string::npos || at == std::string::npos || at < colon) return detail;
  return detail.substr(0, colon) + detail.substr(at);
}

namespace {

// The site of a failure: for assertions "file:line", for content failures the pool read.
std::string site(const SimViolation& v) {
  if (v.invariant == "crash") return v.detail;  // the signal
  if (v.invariant == "sglang.exception") return sglang_exception_site(v.detail);
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
    isolate_ = base_.violation && is_crash(*base_.violation);
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
    const std::vector<Op> cut = ops;
    const Scenario recorded = base_.scenario;
    const bool light = use_light_checks(ops);
    shrink_passes(ops);
    if (light) {
      // The candidates ran with sparser tree walks; the result must fail the same way under the
      // recorded checks. Where a walk finds something else first, shrink again with them.
      base_.scenario.check = recorded.check;
      const RunResult check = replay(ops);  // past the budget too: the result must hold
      if (!check.violation || !same_failure(target_, *check.violation)) {
        log("the shrunk trace fails otherwise under the recorded checks: again with them", ops);
        ops = cut;
        base_.scenario = recorded;
        shrink_passes(ops);
      }
    }
    // Candidates may hold ops that no longer apply (replay skips them); the written trace
    // holds only ops that apply, with their hash chain, so it replays strictly.
    OpTrace t = base_;
    t.ops = ops;
    if (isolate_) {
      result.trace = strict_crash_trace(t);
    } else {
      result.trace = strict_trace(t, options_.setup);
      replays_ += 2;
    }
    result.replays = replays_;
    return result;
  }

 private:
  bool isolate_ = false;  // the failure is a crash: every replay runs in a child process

  void shrink_passes(std::vector<Op>& ops) {
    for (bool changed = true; changed && budget_left();) {
      const size_t before = size_of(ops);
      const Scenario config_before = base_.scenario;
      shrink_pools(ops);  // first: with more requests left, smaller pools still fail
      log("pools", ops);
      ddmin_requests(ops);
      log("requests", ops);
      ddmin_rounds(ops);
      log("rounds", ops);
      drop_kinds(ops);
      log("kinds", ops);
      ddmin(ops);
      log("ddmin", ops);
      drop_windows(ops, 2);
      drop_windows(ops, 3);
      log("windows", ops);
      merge_adjacent(ops);
      simplify(ops);
      log("simplify", ops);
      changed = size_of(ops) < before || to_json(base_.scenario) != to_json(config_before);
    }
  }

  // SGLang's target spends most of a replay in the driver's tree walks (check.full_every 1 walks
  // the tree, the pools and the content after every call). A failure the walks do not find (a
  // per-call check, an exception) shows with the auto spacing too: the candidates then run
  // with it, and the result is checked under the recorded checks at the end (run).
  bool use_light_checks(std::vector<Op>& ops) {
    if (isolate_ || base_.target.kind != Target::Kind::kSglang ||
        base_.scenario.check.full_every == 0) {
      return false;
    }
    const CheckOptions recorded = base_.scenario.check;
    base_.scenario.check.full_every = 0;
    if (fails(ops)) {
      log("light checks (full_every 0) for the candidates", ops);
      return true;
    }
    base_.scenario.check = recorded;
    return false;
  }

  // KVSIM_SHRINK_LOG set: a line per pass on stderr (ops left, replays so far), to see where a
  // shrink's replays go. Changes nothing in the result.
  void log(const char* what, const std::vector<Op>& ops) const {
    static const bool on = std::getenv("KVSIM_SHRINK_LOG") != nullptr;
    if (!on) return;
    std::fprintf(stderr, "shrink: %s: %zu ops, %zu replays, %zu ops replayed\n", what, ops.size(),
                 replays_, replayed_ops_);
  }

  bool budget_left() const {
    return replays_ < options_.max_replays &&
           (options_.max_replay_ops == 0 || replayed_ops_ < options_.max_replay_ops);
  }

  RunResult replay(const std::vector<Op>& ops) {
    ++replays_;
    replayed_ops_ += ops.size();
    OpTrace t = base_;
    t.ops = ops;
    if (isolate_) {
      RunResult r;
      r.violation = replay_isolated(t, options_.setup).violation;
      return r;
    }
    return replay_ops(t, options_.setup);
  }

  // The crash trace as `kvsim replay` takes it: only the ops that applied (the crashing op
  // included), when that still crashes the same way.
  OpTrace strict_crash_trace(const OpTrace& t) {
    OpTrace out = t;
    out.checks.clear();
    out.lines.clear();
    out.source.clear();
    out.declared_ops = -1;
    out.event_hash.reset();
    out.ticks.reset();
    const IsolatedReplay first = replay_isolated(t, options_.setup);
    ++replays_;
    out.violation = first.violation;
    if (!first.violation) return out;
    OpTrace kept = out;
    kept.ops.clear();
    for (size_t i = 0; i < t.ops.size(); ++i) {
      if (i < first.applied.size() && first.applied[i] != 0) kept.ops.push_back(t.ops[i]);
    }
    if (kept.ops.size() == t.ops.size()) return out;
    const IsolatedReplay again = replay_isolated(kept, options_.setup);
    ++replays_;
    if (!again.violation || !same_failure(*first.violation, *again.violation)) return out;
    kept.violation = again.violation;
    if (kept.ops.size() != t.ops.size()) kept.faults_fired.reset();
    return kept;
  }

  // Whether `ops` fail the same way; when they do before their end, the ops after the failing
  // one are cut (they never run: a replay stops at its first violation).
  bool fails(std::vector<Op>& ops) {
    if (!budget_left()) return false;
    const RunResult r = replay(ops);
    if (!r.violation || !same_failure(target_, *r.violation)) return false;
    if (r.violation->op_index > 0 && r.violation->op_index < ops.size())
      ops.resize(r.violation->op_index);
    return true;
  }

  // Ops plus the tokens they carry: what "smaller" means.
  static size_t size_of(const std::vector<Op>& ops) {
    size_t n = ops.size() * 1000;
    for (const Op& op : ops)
      n += op.prompt.size() + static_cast<size_t>(std::max<int64_t>(op.n, 0) % 1000);
    return n;
  }

  // ddmin over groups of ops that only go together, removed a whole group at a time, and
  // groups of groups while whole groups are not needed: far fewer replays than op-level ddmin,
  // whose chunks cut through them. `group_of(ops, i)`: op i's group, or -1 (in none: kept).
  // Groups in order of first appearance; later groups first.
  template <class GroupOf>
  void ddmin_groups(std::vector<Op>& ops, GroupOf group_of) {
    std::vector<int64_t> group(ops.size());
    std::vector<int64_t> ids;
    for (size_t i = 0; i < ops.size(); ++i) {
      group[i] = group_of(ops, i);
      if (group[i] >= 0 && std::find(ids.begin(), ids.end(), group[i]) == ids.end()) {
        ids.push_back(group[i]);
      }
    }
    size_t n = 2;
    while (!ids.empty() && budget_left()) {
      n = std::min(n, ids.size());
      const size_t chunk = (ids.size() + n - 1) / n;
      bool reduced = false;
      for (size_t i = n; i-- > 0 && !reduced && budget_left();) {
        const size_t begin = i * chunk;
        if (begin >= ids.size()) continue;
        const size_t end = std::min(ids.size(), begin + chunk);
        const std::set<int64_t> gone(ids.begin() + static_cast<ptrdiff_t>(begin),
                                     ids.begin() + static_cast<ptrdiff_t>(end));
        std::vector<Op> candidate;
        std::vector<int64_t> candidate_group;
        for (size_t k = 0; k < ops.size(); ++k) {
          if (group[k] >= 0 && gone.count(group[k]) != 0) continue;
          candidate.push_back(ops[k]);
          candidate_group.push_back(group[k]);
        }
        if (candidate.size() < ops.size() && fails(candidate)) {
          ops = std::move(candidate);
          group = std::move(candidate_group);
          group.resize(ops.size());  // fails() cuts what follows the failure
          ids.erase(ids.begin() + static_cast<ptrdiff_t>(begin),
                    ids.begin() + static_cast<ptrdiff_t>(end));
          n = std::max<size_t>(n - 1, 2);
          reduced = true;
        }
      }
      if (reduced) continue;
      if (n >= ids.size()) break;
      n = std::min(ids.size(), n * 2);
    }
  }

  // A request's ops (arrival, admission, computes, prefetch checks, finish, abort).
  void ddmin_requests(std::vector<Op>& ops) {
    ddmin_groups(ops, [](const std::vector<Op>& o, size_t i) {
      return uses_rid(o[i].kind) ? static_cast<int64_t>(o[i].rid) : int64_t{-1};
    });
  }

  // A scheduler round: a tick and the ops up to the next tick (the polls, stream steps,
  // storage steps and request ops of that moment).
  void ddmin_rounds(std::vector<Op>& ops) {
    int64_t round = 0;
    std::vector<int64_t> rounds(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::kTick) ++round;
      rounds[i] = round;
    }
    ddmin_groups(ops, [&rounds](const std::vector<Op>&, size_t i) { return rounds[i]; });
  }

  // ddmin's removals, one sweep per chunk size: every chunk tried once, last first, the chunk
  // halved after each sweep down to single ops. Restarting from the last chunk after each
  // removal (as textbook ddmin does) costs O(n^2) replays at small chunks: with the SGLang
  // target a 141-op trace took ~1,400 replays that way, about 2n in sweeps.
  void ddmin(std::vector<Op>& ops) {
    for (size_t chunk = std::max<size_t>(ops.size() / 2, 1); budget_left(); chunk /= 2) {
      for (size_t end = ops.size(); end > 0 && budget_left();) {
        const size_t begin = end > chunk ? end - chunk : 0;
        std::vector<Op> candidate(ops.begin(), ops.begin() + static_cast<ptrdiff_t>(begin));
        candidate.insert(candidate.end(), ops.begin() + static_cast<ptrdiff_t>(end), ops.end());
        if (fails(candidate)) ops = std::move(candidate);
        end = std::min(begin, ops.size());  // ops before `begin` are as they were
      }
      if (chunk == 1) break;
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
        while (i < ops.size() && ops[i].prompt.size() > 1 && budget_left()) {
          std::vector<Op> candidate = ops;
          candidate[i].prompt.resize(ops[i].prompt.size() / 2);
          if (!fails(candidate)) break;
          ops = std::move(candidate);
        }
        while (i < ops.size() && ops[i].output_len > 1 && budget_left()) {
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
  void shrink_pools(std::vector<Op>& ops) {
    const int64_t page = base_.scenario.cache.page_size;
    // Halves first, then smaller steps (3/4, 7/8): a pool whose half no longer fails the same
    // way (another pressure, another eviction) may still lose a quarter or an eighth.
    for (int64_t HiCacheOptions::*field :
         {&HiCacheOptions::host_tokens, &HiCacheOptions::device_tokens}) {
      for (const int64_t eighths : {4, 6, 7}) {
        while (budget_left()) {
          const int64_t now = base_.scenario.cache.*field;
          const int64_t smaller = now * eighths / 8 / page * page;
          if (smaller < page || smaller == now) break;
          const Scenario kept = base_.scenario;
          base_.scenario.cache.*field = smaller;
          if (!fails(ops)) {
            base_.scenario = kept;
            break;
          }
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
