// Sweeps: run many independent seed jobs on K worker threads and hand their results back in
// seed order, so everything printed or summed from them is the same for every K.
//
//   const SeedRange seeds(first, count, parse_shard("2/4"));
//   run_sweep<RunResult>(seeds, /*jobs=*/4,
//       [&](uint64_t seed) { return run_scenario({.scenario = &s, .seed = seed}); },
//       [&](uint64_t i, uint64_t seed, RunResult& r) { print(seed, r); return true; });
//
// `job` runs on a worker thread (jobs == 1: on the calling thread, no thread is started) and
// must touch nothing shared but read-only inputs: each simulated run owns its executor, core
// and backend, and the core's one global (the KV_ASSERT handler) is thread-local. `consume`
// runs on the calling thread, in seed order, one result at a time; returning false stops the
// sweep: no further seed is started, and results already computed past it are dropped, so a
// sweep that stops at its first failure reports the same seeds whatever K is.
// Workers run at most `window` seeds ahead of the consumer, which bounds memory whatever the
// sweep's length. An exception thrown by a job is rethrown from run_sweep when its turn comes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvsim::sim {

// Shard I of N (0 <= I < N): the seeds whose position in the sweep is I modulo N. The N shards
// of a sweep partition it exactly; a CI matrix runs one shard per job.
struct Shard {
  uint64_t index = 0;
  uint64_t count = 1;
};

// "I/N" with 0 <= I < N <= 2^20; anything else is an InputError naming --shard.
Shard parse_shard(const std::string& text);

// The seeds of shard `shard` of the sweep first, first+1, ..., first+count-1, computed on
// demand (a sweep of 10^8 seeds stores none of them).
class SeedRange {
 public:
  SeedRange() = default;
  // An InputError naming --seed/--seeds when the sweep would pass UINT64_MAX (seeds never
  // wrap), or when count is 0.
  SeedRange(uint64_t first, uint64_t count, Shard shard = {});
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t operator[](uint64_t i) const { return start_ + i * step_; }

 private:
  uint64_t start_ = 0;
  uint64_t step_ = 1;
  uint64_t size_ = 0;
};

// The untyped engine behind run_sweep: work(i, slot) for i in [0, n) on `jobs` threads,
// deliver(i, slot) in order on the calling thread once work(i, slot) is done; deliver returning
// false stops. slot = i % window: at most `window` indices are in flight at once.
void run_indexed(uint64_t n, unsigned jobs, size_t window,
                 const std::function<void(uint64_t, size_t)>& work,
                 const std::function<bool(uint64_t, size_t)>& deliver);

// Default number of seeds in flight per worker (see window above).
inline constexpr size_t kSweepWindowPerJob = 2;

// jobs: 1 or more (0 is treated as 1). Returns how many results were consumed.
template <class Result>
uint64_t run_sweep(
    const SeedRange& seeds, unsigned jobs, const std::function<Result(uint64_t seed)>& job,
    const std::function<bool(uint64_t index, uint64_t seed, Result& result)>& consume) {
  const size_t window = kSweepWindowPerJob * (jobs == 0 ? 1 : jobs);
  std::vector<std::optional<Result>> slots(window);
  uint64_t consumed = 0;
  run_indexed(
      seeds.size(), jobs, window,
      [&](uint64_t i, size_t slot) { slots[slot].emplace(job(seeds[i])); },
      [&](uint64_t i, size_t slot) {
        ++consumed;
        const bool more = consume(i, seeds[i], *slots[slot]);
        slots[slot].reset();
        return more;
      });
  return consumed;
}

}  // namespace kvsim::sim
