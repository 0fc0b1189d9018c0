// NodeIdMap (core/common/node_id_map.h) against std::map under long random runs of set /
// erase / find, with ids chosen to collide in the table and to wrap around its end.
#include "core/common/node_id_map.h"

#include <gtest/gtest.h>

#include <map>

namespace kvsim {
namespace {

// splitmix64: the test's own deterministic stream (core tests do not link the simulator).
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(NodeIdMap, AgreesWithAnOrderedMapUnderRandomSetEraseFind) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    uint64_t rng = seed;
    NodeIdMap<int64_t> map;
    std::map<NodeId, int64_t> model;
    // Few distinct ids (many revisits and erasures) in some runs, many in others (growth).
    const uint64_t ids = seed == 1 ? 50 : seed == 2 ? 5000 : 200000;
    for (int step = 0; step < 200000; ++step) {
      const NodeId id = next(rng) % ids * (seed == 3 ? 1024 : 1);  // clustered homes
      const uint64_t op = next(rng) % 10;
      if (op < 5) {
        map.set(id, step);
        model[id] = step;
      } else if (op < 8) {
        ASSERT_EQ(map.erase(id), model.erase(id) == 1) << "seed " << seed << " step " << step;
      } else {
        const auto it = model.find(id);
        const int64_t* got = map.find(id);
        ASSERT_EQ(got != nullptr, it != model.end()) << "seed " << seed << " step " << step;
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
      }
      ASSERT_EQ(map.size(), model.size());
    }
    std::map<NodeId, int64_t> seen;
    map.for_each([&](NodeId id, int64_t v) { EXPECT_TRUE(seen.emplace(id, v).second); });
    EXPECT_EQ(seen, model);
    for (const auto& [id, call] : model) {
      ASSERT_NE(map.find(id), nullptr);
      ASSERT_EQ(*map.find(id), call);
    }
    map.clear();
    EXPECT_EQ(map.size(), 0u);
    for (const auto& kv : model)
      EXPECT_EQ(map.find(kv.first), nullptr);
  }
}

TEST(NodeIdMap, RootIdZeroIsAKeyLikeAnyOther) {
  NodeIdMap<int64_t> map;
  EXPECT_EQ(map.find(0), nullptr);
  EXPECT_FALSE(map.erase(0));
  map.set(0, 7);
  ASSERT_NE(map.find(0), nullptr);
  EXPECT_EQ(*map.find(0), 7);
  EXPECT_TRUE(map.erase(0));
  EXPECT_EQ(map.find(0), nullptr);
}

}  // namespace
}  // namespace kvsim
