// An evict's freed slots (sim/trace/call_trace.h EvictedLeaves): copy_slots_to and slots() give
// every victim's slots in order, and hash_freed_slots, which folds version 3's runs victim by
// victim without building that list, equals hash_slots of it, runs continuing across victims
// included.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sim/trace/call_trace.h"
#include "tests/support/tree_fixture.h"

namespace kvsim::sim {
namespace {

using kvsim::testing::dev;
using kvsim::testing::slot_seq;

EvictedLeaves leaves(std::vector<IndexVector> freed) {
  EvictedLeaves e;
  for (const IndexVector& v : freed)
    e.freed_tokens += static_cast<int64_t>(v.size());
  e.freed = std::move(freed);
  return e;
}

// Every slot of every victim, read one by one (the reference for slots()).
std::vector<SlotIndex> concat(const EvictedLeaves& e) {
  std::vector<SlotIndex> out;
  for (const IndexVector& v : e.freed) {
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(v[i]);
  }
  return out;
}

// A victim: empty, per-token or page-granular, starting at *next (continuing the last victim's
// run) or elsewhere, holding runs of any length (over 32: the block fast path) with jumps.
IndexVector victim(std::mt19937_64& rng, SlotIndex* next) {
  const uint64_t kind = rng() % 8;
  if (kind == 0) return IndexVector(Tier::kDevice, {});
  if (rng() % 2 == 0) *next = static_cast<SlotIndex>(rng() % 100000);
  const size_t n = rng() % 6 == 0 ? 40 + rng() % 100 : 1 + rng() % 12;
  if (kind <= 3) {
    const int32_t page = kind == 1 ? 4 : 16;
    std::vector<SlotIndex> firsts;
    for (size_t p = 0; p < n; ++p) {
      if (rng() % 5 == 0) *next += page * static_cast<SlotIndex>(1 + rng() % 3);
      firsts.push_back(*next);
      *next += page;
    }
    return IndexVector::pages(Tier::kDevice, page, std::move(firsts));
  }
  std::vector<SlotIndex> slots;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 10 == 0) *next = rng() % 3 == 0 ? *next - 1 : *next + 5;  // a jump (or back)
    slots.push_back((*next)++);
  }
  return IndexVector(Tier::kDevice, std::move(slots));
}

TEST(FreedSlotsHash, EqualsTheHashOfTheWholeListOnRandomEvicts) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::vector<IndexVector> freed;
    SlotIndex next = 1000;
    for (size_t n = rng() % 10; n > 0; --n)
      freed.push_back(victim(rng, &next));
    const EvictedLeaves e = leaves(std::move(freed));
    const std::vector<SlotIndex> all = concat(e);
    ASSERT_EQ(all.size(), static_cast<size_t>(e.freed_tokens));
    ASSERT_EQ(e.slots(), all) << round;
    std::vector<SlotIndex> buf(all.size() + 1, -7);
    e.copy_slots_to(buf.data());
    ASSERT_EQ(buf.back(), -7) << "wrote past freed_tokens, round " << round;
    buf.pop_back();
    ASSERT_EQ(buf, all) << round;
    for (int version : {1, 2, 3})
      ASSERT_EQ(hash_freed_slots(e, version), hash_slots(all, version)) << round << " v" << version;
  }
}

TEST(FreedSlotsHash, RunsJoinAcrossVictimsAndEmptyOnes) {
  // SlotsHash pins hash_slots(slot_seq(5, 40) + slot_seq(900, 3), 3); the same slots cut into
  // victims, page-granular or not, with empty victims between, must fold to the same runs.
  const uint64_t pinned = 10733935830705458034ull;
  const IndexVector empty(Tier::kDevice, {});
  EXPECT_EQ(hash_freed_slots(leaves({dev(5, 40), dev(900, 3)}), 3), pinned);
  EXPECT_EQ(hash_freed_slots(
                leaves({empty, IndexVector::pages(Tier::kDevice, 8, {5, 13, 21}), empty, dev(29, 8),
                        IndexVector::pages(Tier::kDevice, 4, {37, 41}), empty, dev(900, 3), empty}),
                3),
            pinned);
  // A run broken where two victims meet is two runs: another hash.
  EXPECT_NE(hash_freed_slots(leaves({dev(5, 20), dev(26, 20), dev(900, 3)}), 3), pinned);
  const EvictedLeaves none = leaves({empty, empty});
  for (int version : {1, 2, 3})
    EXPECT_EQ(hash_freed_slots(none, version), hash_slots({}, version)) << version;
  EXPECT_TRUE(none.slots().empty());
}

TEST(FreedSlotsHash, IndexVectorCopySlotsToEqualsSlots) {
  for (const IndexVector& v :
       {IndexVector(Tier::kDevice, {}), IndexVector(Tier::kDevice, {9, 3, 4, 100}),
        IndexVector::pages(Tier::kDevice, 4, {0, 100, 104}),
        IndexVector::pages(Tier::kDevice, 1, {7, 8}),
        IndexVector::pages(Tier::kDevice, 16, {-32, 64})}) {
    std::vector<SlotIndex> buf(v.size() + 1, -7);
    v.copy_slots_to(buf.data());
    EXPECT_EQ(buf.back(), -7);
    buf.pop_back();
    EXPECT_EQ(buf, v.slots());
    EXPECT_EQ(buf, v.to_vector());
  }
}

}  // namespace
}  // namespace kvsim::sim
