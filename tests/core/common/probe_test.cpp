// Code probes (core/common/probe.h): counting, the full declared list in snapshots, reset,
// per-thread counters, accumulation. probe_off_test.cpp checks the compiled-out form.
#include "core/common/probe.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

namespace kvsim::probes {
namespace {

uint64_t count_of(const Snapshot& s, std::string_view name) {
  for (const Count& c : s) {
    if (c.name == name) return c.count;
  }
  ADD_FAILURE() << "probe " << name << " is not in the snapshot";
  return 0;
}

TEST(Probe, KvProbeIncrementsItsOwnCounterOnly) {
  reset();
  KV_PROBE(tree_split_locked);
  KV_PROBE(tree_split_locked);
  KV_PROBE(ctl_write_no_host);
  const Snapshot s = snapshot();
  EXPECT_EQ(count_of(s, "tree_split_locked"), 2u);
  EXPECT_EQ(count_of(s, "ctl_write_no_host"), 1u);
  EXPECT_EQ(count_of(s, "ctl_load_no_device"), 0u);
}

TEST(Probe, ProbeIfCountsOnlyWhenTheConditionHolds) {
  reset();
  int evaluated = 0;
  KV_PROBE_IF((++evaluated, false), lb_evicts_to_fit);
  KV_PROBE_IF((++evaluated, true), lb_evicts_to_fit);
  EXPECT_EQ(evaluated, 2);
  EXPECT_EQ(count_of(snapshot(), "lb_evicts_to_fit"), 1u);
}

TEST(Probe, SnapshotListsEveryDeclaredProbeInOrderIncludingUnreached) {
  reset();
  KV_PROBE(st_prefetch_shrunk);
  const Snapshot s = snapshot();
  ASSERT_EQ(s.size(), kCount);
  ASSERT_EQ(all().size(), kCount);
  std::set<std::string_view> names;
  size_t unreached = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].name, all()[i].name);
    EXPECT_FALSE(all()[i].file.empty()) << s[i].name;
    EXPECT_FALSE(all()[i].meaning.empty()) << s[i].name;
    names.insert(s[i].name);
    unreached += s[i].count == 0 ? 1 : 0;
  }
  EXPECT_EQ(names.size(), kCount) << "two probes share a name";
  EXPECT_EQ(unreached, kCount - 1);
}

TEST(Probe, ResetZeroesEveryCounter) {
  KV_PROBE(aux_tombstone);
  KV_PROBE(req_finish_duplicate);
  reset();
  for (const Count& c : snapshot())
    EXPECT_EQ(c.count, 0u) << c.name;
}

TEST(Probe, HitsInsideUncountedArePutBack) {
  reset();
  KV_PROBE(aux_tombstone);
  {
    const Uncounted scope;
    KV_PROBE(aux_tombstone);
    KV_PROBE(req_finish_duplicate);
    EXPECT_EQ(count_of(snapshot(), "aux_tombstone"), 2u);  // counted while it lives
  }
  EXPECT_EQ(count_of(snapshot(), "aux_tombstone"), 1u);
  EXPECT_EQ(count_of(snapshot(), "req_finish_duplicate"), 0u);
  KV_PROBE(req_finish_duplicate);
  EXPECT_EQ(count_of(snapshot(), "req_finish_duplicate"), 1u);
}

TEST(Probe, CountersArePerThread) {
  reset();
  KV_PROBE(cache_evict_short);
  uint64_t other_before = 99;
  uint64_t other_after = 99;
  std::thread t([&] {
    other_before = count_of(snapshot(), "cache_evict_short");
    KV_PROBE(cache_evict_short);
    KV_PROBE(cache_evict_short);
    other_after = count_of(snapshot(), "cache_evict_short");
  });
  t.join();
  EXPECT_EQ(other_before, 0u);
  EXPECT_EQ(other_after, 2u);
  EXPECT_EQ(count_of(snapshot(), "cache_evict_short"), 1u);
}

TEST(Probe, AccumulateSumsSnapshots) {
  reset();
  KV_PROBE(lb_swa_window);
  Snapshot total;
  accumulate(total, snapshot());
  reset();
  KV_PROBE(lb_swa_window);
  KV_PROBE(lb_mamba_only);
  accumulate(total, snapshot());
  ASSERT_EQ(total.size(), kCount);
  EXPECT_EQ(count_of(total, "lb_swa_window"), 2u);
  EXPECT_EQ(count_of(total, "lb_mamba_only"), 1u);
  EXPECT_EQ(count_of(total, "lb_over_quota"), 0u);
}

}  // namespace
}  // namespace kvsim::probes
