// Sweeps (sim/campaign/sweep.h): shards partition a sweep exactly, results arrive in seed order
// whatever the number of workers, a stop is honoured at the same seed for every K, and a simulated
// run gives the same result on a worker thread as on the main thread.
#include "sim/campaign/sweep.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>

#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"

namespace kvsim::sim {
namespace {

TEST(Sweep, ShardsPartitionTheSeedsExactly) {
  for (uint64_t count : {1u, 2u, 7u, 200u, 1001u}) {
    for (uint64_t n : {1u, 2u, 3u, 8u, 250u}) {
      std::multiset<uint64_t> seen;
      for (uint64_t i = 0; i < n; ++i) {
        const SeedRange r(5, count, Shard{i, n});
        for (uint64_t k = 0; k < r.size(); ++k)
          seen.insert(r[k]);
      }
      ASSERT_EQ(seen.size(), count) << count << " seeds in " << n << " shards";
      uint64_t expect = 5;
      for (uint64_t s : seen)
        EXPECT_EQ(s, expect++);
    }
  }
}

TEST(Sweep, ParseShardAcceptsIOverN) {
  const Shard s = parse_shard("3/8");
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(parse_shard("0/1").count, 1u);
}

TEST(Sweep, ParseShardRejectsBadValuesWithTheFlagNamed) {
  for (const char* bad :
       {"", "3", "8/8", "9/8", "1/0", "-1/4", "a/b", "1/4/2", " 1/4", "1/99999999"}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--shard"), std::string::npos) << e.what();
    }
  }
}

TEST(Sweep, SeedsNeverWrap) {
  EXPECT_THROW(SeedRange(UINT64_MAX, 3), InputError);
  EXPECT_THROW(SeedRange(1, 0), InputError);
  const SeedRange last(UINT64_MAX - 2, 3);
  EXPECT_EQ(last[2], UINT64_MAX);
}

// Results are consumed in seed order for every K, and stopping at a seed consumes the same
// prefix for every K, however long each job takes.
TEST(Sweep, ResultsInSeedOrderAndStopIndependentOfJobs) {
  const SeedRange seeds(10, 60);
  for (unsigned jobs : {1u, 2u, 3u, 8u}) {
    std::vector<uint64_t> got;
    std::atomic<int> started{0};
    const uint64_t consumed = run_sweep<uint64_t>(
        seeds, jobs,
        [&](uint64_t seed) {
          ++started;
          volatile uint64_t x = 0;  // uneven job lengths
          for (uint64_t i = 0; i < (seed % 7) * 20000; ++i)
            x = x + i;
          return seed * seed;
        },
        [&](uint64_t i, uint64_t seed, uint64_t& r) {
          EXPECT_EQ(seed, seeds[i]);
          EXPECT_EQ(r, seed * seed);
          got.push_back(seed);
          return seed != 40;  // stop here
        });
    EXPECT_EQ(consumed, 31u) << jobs;
    ASSERT_EQ(got.size(), 31u);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], 10 + i);
    // Workers run at most a window ahead of the consumer.
    EXPECT_LE(started.load(), 31 + static_cast<int>(kSweepWindowPerJob * jobs)) << jobs;
  }
}

TEST(Sweep, JobExceptionIsRethrownInTurn) {
  for (unsigned jobs : {1u, 2u, 4u}) {
    std::vector<uint64_t> got;
    EXPECT_THROW(run_sweep<int>(
                     SeedRange(1, 50), jobs,
                     [](uint64_t seed) {
                       if (seed == 17) throw std::runtime_error("boom");
                       return 0;
                     },
                     [&](uint64_t, uint64_t seed, int&) {
                       got.push_back(seed);
                       return true;
                     }),
                 std::runtime_error);
    EXPECT_EQ(got.size(), 16u) << jobs;
  }
}

// A simulated run on worker threads gives the hashes it gives on the calling thread, faults
// and core assertions (thread-local handler) included.
TEST(Sweep, SimulatedRunsAreIndependentOfJobs) {
  const Scenario s = default_scenario();
  auto hashes = [&](unsigned jobs) {
    std::vector<std::pair<uint64_t, bool>> out;
    run_sweep<RunResult>(
        SeedRange(1, 6), jobs,
        [&](uint64_t seed) { return run_scenario(RunRequest{.scenario = &s, .seed = seed}); },
        [&](uint64_t, uint64_t, RunResult& r) {
          out.emplace_back(r.event_hash, r.ok());
          return true;
        });
    return out;
  };
  const auto one = hashes(1);
  EXPECT_EQ(one, hashes(2));
  EXPECT_EQ(one, hashes(3));
}

}  // namespace
}  // namespace kvsim::sim
