// core_ops_fuzzer: libFuzzer bytes → a sequence of simulator ops applied to the real core.
//
// Input layout: byte 0 picks the cache variant (variant_scenario), byte 1 the executor's seed;
// the rest feeds a FuzzedDataProvider: one byte picks the next op from kOps, and each op
// consumes its own argument bytes. Prompts are a cut of one of three shared prefixes plus a few
// tokens of a six-token vocabulary, request ids come from 1..kRidsMax and the pools are tiny, so
// prefix hits, evictions, load-backs, write-backs, prefetches, retract/resume and aborts of
// requests with transfers in flight all happen within a few dozen ops.
//
// Storage ops may arm one storage fault (read error, vanished or corrupt page, short read,
// failed or torn write, slow I/O) for their step, as the simulator's fault sites do.
//
// Property: every op leaves every executor invariant intact (executor.h), and after a drain
// (flush, copy streams and storage run to idle, every unfinished request aborted) the cache is
// quiescent. The executor turns core assertions into a "core.assert" violation. Ops that make
// no sense in the current state are skipped by the executor, never an error, so any byte string
// is a valid input. A violation writes the op trace (fuzz_support.h) and aborts.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "core/common/assert.h"
#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/config/scenario.h"
#include "sim/model/executor.h"
#include "sim/model/op.h"
#include "sim/model/storage_faults.h"

namespace kvsim::fuzz {
namespace {

using sim::Executor;
using sim::Op;
using sim::OpKind;
using sim::RequestState;
using sim::Scenario;

constexpr size_t kOpsMax = 64;               // ops per input, before the drain
constexpr RequestId kRidsMax = 10;           // request ids 1..kRidsMax (each arrives at most once)
constexpr int64_t kStorageRoundsMax = 4096;  // drain: storage worker rounds before giving up
constexpr int64_t kVariants = 6;

// Shared prompt prefixes (the second is not page-aligned; the third shares the first's start).
const std::array<std::vector<Token>, 3> kPrefixes = {
    std::vector<Token>{101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112},
    std::vector<Token>{201, 202, 203, 204, 205, 206, 207, 208, 209, 210},
    std::vector<Token>{101, 102, 103, 104, 105, 106, 301, 302, 303, 304,
                       305, 306, 307, 308, 309, 310, 311, 312, 313, 314}};
constexpr Token kVocab = 6;  // suffix tokens are 1..kVocab

// Variant = byte % 6: 0 plain write-through, 1 SWA (window 8), 2 Mamba, 3 write-back,
// 4 storage tier with prefetch, 5 PD decode with a sparse index buffer. byte / 6 adds flags:
// bit 0 LFU eviction, bit 1 layer-first host layout, bit 2 write-through-selective (variants
// 0-2), bit 3 load-back threshold 0 instead of 4, bit 4 single-tier cache (variant 0 only).
Scenario make_variant(uint8_t byte) {
  Scenario s = sim::default_scenario();
  s.name = "core_ops_fuzzer";
  s.description = "fuzz/core_ops_fuzzer.cpp variant " + std::to_string(byte);
  HiCacheOptions& c = s.cache;
  c.page_size = 4;
  c.device_tokens = 128;
  c.host_tokens = 256;
  c.load_back_threshold_tokens = 4;
  // The workload is unused here but must pass validate(): the largest request fits the device.
  s.workload.system_prompt_tokens = 16;
  s.workload.prompt_min = 4;
  s.workload.prompt_max = 16;
  s.workload.output_max = 8;
  s.scheduler.max_running = 4;
  s.check.full_every = 1;
  s.check.content = true;
  const int variant = byte % kVariants;
  const int flags = byte / kVariants;
  switch (variant) {
    case 1:
      c.swa_window_tokens = 8;
      c.swa_device_tokens = 64;
      c.swa_host_tokens = 128;
      break;
    case 2:
      c.mamba_device_states = 6;
      c.mamba_host_states = 8;
      c.mamba_state_bytes = 16;
      break;
    case 3:
      c.write_policy = WritePolicy::kWriteBack;
      break;
    case 4:
      s.storage = true;
      c.prefetch_threshold_tokens = 4;
      break;
    case 5:
      s.scheduler.mode = sim::SchedulerMode::kPd;
      s.sparse_index_bytes_per_page = 32;
      s.scheduler.metadata_slots = 4;
      s.scheduler.cpu_copy_chunk_tokens = 8;
      break;
    default:
      break;
  }
  if (flags & 1) c.eviction_policy = EvictionPolicy::kLfu;
  if (flags & 2) c.host_layout = KVLayout::kLayerFirst;
  if ((flags & 4) && variant <= 2) c.write_policy = WritePolicy::kWriteThroughSelective;
  if (flags & 8) c.load_back_threshold_tokens = 0;
  if ((flags & 16) && variant == 0) c.hierarchical = false;
  return s;
}

// The 256 scenarios, built once and passed through the scenario parser: what runs is exactly
// what the op trace's header replays, and a variant no scenario file could express is a bug of
// this file, caught at its first input.
const Scenario& variant_scenario(uint8_t byte) {
  static std::array<std::unique_ptr<Scenario>, 256> cache;
  std::unique_ptr<Scenario>& s = cache[byte];
  if (!s) {
    const Scenario built = make_variant(byte);
    try {
      s = std::make_unique<Scenario>(sim::parse_scenario(sim::to_json(built), built.name));
    } catch (const sim::InputError& e) {
      report_property("core_ops_fuzzer", std::string("invalid variant: ") + e.what());
    }
  }
  return *s;
}

RequestId pick_rid(FuzzedDataProvider& in) {
  return in.ConsumeIntegralInRange<RequestId>(1, kRidsMax);
}

Op arrive(FuzzedDataProvider& in, const Executor&) {
  Op op{.kind = OpKind::kArrive, .rid = pick_rid(in)};
  op.ns = in.ConsumeIntegralInRange<Namespace>(0, 3) == 3 ? 1 : 0;
  const uint8_t prefix = in.ConsumeIntegralInRange<uint8_t>(0, kPrefixes.size());
  if (prefix < kPrefixes.size()) {
    const std::vector<Token>& p = kPrefixes[prefix];
    // Mostly the whole prefix; sometimes a cut of it (a partial, possibly unaligned, match).
    const size_t cut = in.ConsumeBool() ? p.size() : in.ConsumeIntegralInRange<size_t>(1, p.size());
    op.prompt.assign(p.begin(), p.begin() + static_cast<ptrdiff_t>(cut));
  }
  const size_t suffix = in.ConsumeIntegralInRange<size_t>(op.prompt.empty() ? 1 : 0, 12);
  for (size_t i = 0; i < suffix; ++i)
    op.prompt.push_back(in.ConsumeIntegralInRange<Token>(1, kVocab));
  op.output_len = in.ConsumeIntegralInRange<int64_t>(1, 8);
  return op;
}

Op with_rid(OpKind kind, FuzzedDataProvider& in) {
  return Op{.kind = kind, .rid = pick_rid(in)};
}

Op compute(FuzzedDataProvider& in, const Executor& ex) {
  Op op{.kind = OpKind::kCompute, .rid = pick_rid(in)};
  const sim::SimRequest* r = ex.request(op.rid);
  const int64_t computed = r == nullptr ? 0 : static_cast<int64_t>(r->computed);
  const int64_t tokens = r == nullptr ? 1 : static_cast<int64_t>(r->tokens.size());
  const int64_t left = r == nullptr ? 0 : r->output_len - r->generated;
  // A small step (chunked prefill or decode), the rest of the prompt, or everything at once.
  const uint8_t how = in.ConsumeIntegralInRange<uint8_t>(0, 9);
  if (how < 8) {
    op.n = computed + 1 + how;
  } else if (how == 8) {
    op.n = std::max(tokens, computed + 1);
  } else {
    op.n = tokens + left;
  }
  op.flag = in.ConsumeIntegralInRange<uint8_t>(0, 15) == 0;  // injected allocation failure
  return op;
}

// One unit of storage work with one of the storage tier's operating faults armed for it
// (sim/model/storage_faults.h): a read fault may meet a later page of the batch.
Op storage_with_fault(FuzzedDataProvider& in, const Executor&) {
  Op op{.kind = OpKind::kStorage, .target = in.ConsumeIntegralInRange<uint32_t>(0, 2)};
  const auto fault = in.ConsumeIntegralInRange<int64_t>(1, sim::kStorageFaults - 1);
  const auto skip = in.ConsumeIntegralInRange<int64_t>(0, 3);
  op.n = fault | (skip << sim::kStorageFaultSkipShift);
  return op;
}

// Op 0 is benign (a poll point); the order is the byte encoding of existing corpus files (new
// ops go at the end).
using OpMaker = Op (*)(FuzzedDataProvider&, const Executor&);
constexpr OpMaker kOps[] = {
    [](FuzzedDataProvider&, const Executor&) { return Op{.kind = OpKind::kPoll}; },
    arrive,
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kPrefetchCheck, in); },
    [](FuzzedDataProvider& in, const Executor&) {
      Op op = with_rid(OpKind::kAdmit, in);
      op.flag = in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0;  // load-back allowed
      return op;
    },
    compute,
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kFinish, in); },
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kAbort, in); },
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kRetract, in); },
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kOffload, in); },
    [](FuzzedDataProvider& in, const Executor&) { return with_rid(OpKind::kResume, in); },
    [](FuzzedDataProvider& in, const Executor&) {
      return Op{.kind = OpKind::kStep,
                .n = in.ConsumeIntegralInRange<int64_t>(1, 8),
                .target = in.ConsumeIntegralInRange<uint32_t>(0, 2)};
    },
    [](FuzzedDataProvider& in, const Executor&) {
      return Op{.kind = OpKind::kStorage, .target = in.ConsumeIntegralInRange<uint32_t>(0, 2)};
    },
    [](FuzzedDataProvider& in, const Executor& ex) {
      // Mostly a few ticks; sometimes past every prefetch timeout (2,000 ticks and more).
      const int64_t dt = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 4) : 2500;
      return Op{.kind = OpKind::kTick, .n = static_cast<int64_t>(ex.now()) + dt};
    },
    [](FuzzedDataProvider&, const Executor&) { return Op{.kind = OpKind::kFlush}; },
    storage_with_fault,
    // An admit as SGLang's batched scheduler makes it: its load-back queued for the next
    // start_loads (target 1), sometimes under a memory quota.
    [](FuzzedDataProvider& in, const Executor&) {
      Op op = with_rid(OpKind::kAdmit, in);
      op.flag = true;
      op.target = 1;
      op.quota = in.ConsumeBool() ? -1 : in.ConsumeIntegralInRange<int64_t>(0, 64);
      return op;
    },
    [](FuzzedDataProvider&, const Executor&) { return Op{.kind = OpKind::kStartLoads}; },
};
// One input byte picks an op: more ops than that need a wider selector.
static_assert(std::size(kOps) < 256, "the op selector is one byte");

class Run {
 public:
  Run(const Scenario& s, uint64_t seed) : executor_(s, seed) {}

  // Applies and records `op`; false once a violation was seen.
  bool apply(const Op& op, sim::OpOutcome* out = nullptr) {
    ops_.push_back(op);
    const sim::OpOutcome o = executor_.apply(op);
    if (out != nullptr) *out = o;
    return !executor_.failed();
  }

  // Everything in flight lands and every request ends; then the cache must be quiescent.
  // (A flush synchronizes every stream and consumes the acks; storage runs until idle.)
  bool drain() {
    if (!apply(Op{.kind = OpKind::kFlush}) || !run_storage()) return false;
    std::vector<RequestId> live;
    for (const auto& [rid, r] : executor_.requests()) {
      if (r.state != RequestState::kDone) live.push_back(rid);
    }
    for (RequestId rid : live) {
      if (!apply(Op{.kind = OpKind::kAbort, .rid = rid})) return false;
    }
    if (!apply(Op{.kind = OpKind::kFlush})) return false;
    if (executor_.cache().storage_enabled()) {
      if (!run_storage() || !apply(Op{.kind = OpKind::kFlush})) return false;
    }
    // check_quiescent's sanity_check runs outside the executor's own assertion scope: a core
    // assertion there becomes a "core.assert" violation too, not a trace-less abort.
    ScopedThrowingAsserts asserts;
    try {
      executor_.check_quiescent();
    } catch (const AssertionFailure& e) {
      assertion_ = sim::SimViolation{"core.assert", e.what(), ops_.size()};
    }
    return !executor_.failed() && !assertion_;
  }

  Executor& executor() { return executor_; }

  sim::OpTrace trace() const {
    return sim::OpTrace{.scenario = executor_.scenario(),
                        .seed = seed_of_trace_,
                        .ops = ops_,
                        .event_hash = executor_.event_hash(),
                        .violation = executor_.failed() ? executor_.violation() : assertion_};
  }
  void set_seed(uint64_t seed) { seed_of_trace_ = seed; }

 private:
  bool run_storage() {
    if (!executor_.cache().storage_enabled()) return true;
    for (int64_t round = 0; round < kStorageRoundsMax; ++round) {
      bool progress = false;
      for (uint32_t worker = 0; worker < 3; ++worker) {
        sim::OpOutcome o;
        if (!apply(Op{.kind = OpKind::kStorage, .target = worker}, &o)) return false;
        progress = progress || o.ok;
      }
      if (!progress) return true;
    }
    return true;
  }

  Executor executor_;
  std::vector<Op> ops_;
  std::optional<sim::SimViolation> assertion_;
  uint64_t seed_of_trace_ = 0;
};

}  // namespace
}  // namespace kvsim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim::fuzz;
  if (size < 2) return 0;
  const kvsim::sim::Scenario& scenario = variant_scenario(data[0]);
  const uint64_t seed = data[1];
  FuzzedDataProvider in(data + 2, size - 2);
  Run run(scenario, seed);
  run.set_seed(seed);
  bool ok = true;
  for (size_t i = 0; ok && i < kOpsMax && in.remaining_bytes() > 0; ++i) {
    const uint8_t pick = in.ConsumeIntegralInRange<uint8_t>(0, std::size(kOps) - 1);
    ok = run.apply(kOps[pick](in, run.executor()));
  }
  if (ok) ok = run.drain();
  if (!ok) report_violation("core_ops", data, size, run.trace());
  return 0;
}
