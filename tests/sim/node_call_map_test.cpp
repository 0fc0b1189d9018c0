// NodeCallMap (sim/node_call_map.h) against std::map under long random runs of set / erase /
// find, with ids chosen to collide in the table and to wrap around its end.
#include "sim/node_call_map.h"

#include <gtest/gtest.h>

#include <map>

#include "sim/rng.h"

namespace kvsim::sim {
namespace {

TEST(NodeCallMap, AgreesWithAnOrderedMapUnderRandomSetEraseFind) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    Rng rng(seed);
    NodeCallMap map;
    std::map<NodeId, int64_t> model;
    // Few distinct ids (many revisits and erasures) in some runs, many in others (growth).
    const uint64_t ids = seed == 1 ? 50 : seed == 2 ? 5000 : 200000;
    for (int step = 0; step < 200000; ++step) {
      const NodeId id = rng.below(ids) * (seed == 3 ? 1024 : 1);  // clustered homes
      const uint64_t op = rng.below(10);
      if (op < 5) {
        map.set(id, step);
        model[id] = step;
      } else if (op < 8) {
        map.erase(id);
        model.erase(id);
      } else {
        const auto it = model.find(id);
        const std::optional<int64_t> got = map.find(id);
        ASSERT_EQ(got.has_value(), it != model.end()) << "seed " << seed << " step " << step;
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
      }
      ASSERT_EQ(map.size(), model.size());
    }
    for (const auto& [id, call] : model)
      ASSERT_EQ(map.find(id), std::optional<int64_t>(call));
    map.clear();
    EXPECT_EQ(map.size(), 0u);
    for (const auto& kv : model)
      EXPECT_FALSE(map.find(kv.first).has_value());
  }
}

TEST(NodeCallMap, RootIdZeroIsAKeyLikeAnyOther) {
  NodeCallMap map;
  EXPECT_FALSE(map.find(0).has_value());
  map.set(0, 7);
  EXPECT_EQ(map.find(0), std::optional<int64_t>(7));
  map.erase(0);
  EXPECT_FALSE(map.find(0).has_value());
}

}  // namespace
}  // namespace kvsim::sim
