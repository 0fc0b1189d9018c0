// Per-op cost of the core's radix tree by tree size, 10^2 to 10^6 nodes: one "request" is
// match_prefix of a cached two-node path, lock, unlock, the insert of a new leaf and the
// eviction of the least recently used leaf (so the tree keeps its size). Per-request time
// should stay flat as the tree grows (issue 12 target: within 1.5x from 10^2 to 10^6 nodes).
//
//   ./build/default/bench/kvsim_tree_bench
#include <benchmark/benchmark.h>

#include <vector>

#include "core/pools/paged_allocator.h"
#include "core/tree/radix_tree.h"

namespace {

using kvsim::Token;

constexpr int32_t kPage = 4;
constexpr int kLeavesPerGroup = 4;  // a group: one shared prefix node and its leaves

// Deterministic token pages: group prefixes and leaves never share a token.
void page_of(uint64_t id, bool leaf, std::vector<Token>& out) {
  const auto base = static_cast<Token>((leaf ? (1u << 29) : 0u) + (id % (1u << 26)) * kPage);
  for (Token t = 0; t < kPage; ++t)
    out.push_back(base + t);
}

void BM_TreeRequest(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  const int64_t groups = std::max<int64_t>(1, nodes / (kLeavesPerGroup + 1));
  kvsim::PagedSlotAllocator alloc(kvsim::Tier::kDevice, (nodes + 2 * kLeavesPerGroup) * 2 * kPage,
                                  kPage);
  kvsim::RadixTree tree(kvsim::RadixTreeOptions{.page_size = kPage});
  std::vector<Token> key;
  uint64_t next_leaf = 0;
  auto insert_leaf = [&](uint64_t group) {
    key.clear();
    page_of(group, false, key);
    page_of(next_leaf++, true, key);
    kvsim::MatchResult m = tree.match_prefix(0, key);
    const int64_t hit = m.device_hit_length();
    kvsim::IndexVector value = std::move(m.device_indices);
    value.append(*alloc.alloc(static_cast<int64_t>(key.size()) - hit));
    const kvsim::InsertResult r = tree.insert(0, key, value);
    if (r.prefix_len > hit) {
      alloc.free(value.slice(static_cast<size_t>(hit), static_cast<size_t>(r.prefix_len)));
    }
  };
  for (int64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < kLeavesPerGroup; ++j)
      insert_leaf(static_cast<uint64_t>(g));
  }
  const size_t built = tree.node_count();
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (auto _ : state) {
    // A hit on a cached leaf (an existing leaf id of a random live group, if still cached).
    const uint64_t leaf = next() % next_leaf;
    key.clear();
    page_of(leaf / kLeavesPerGroup % static_cast<uint64_t>(groups), false, key);
    page_of(leaf, true, key);
    kvsim::MatchResult m = tree.match_prefix(0, key);
    const kvsim::LockRecord lock = tree.lock(*m.last_device_node);
    tree.unlock(lock);
    benchmark::DoNotOptimize(m.device_indices.size());
    // Churn: a new leaf in a random group, and the LRU leaf goes.
    insert_leaf(next() % static_cast<uint64_t>(groups));
    kvsim::TreeNode* victim = tree.next_device_victim();
    alloc.free(tree.remove_device_leaf(*victim).full_device());
  }
  state.counters["tree_nodes"] = static_cast<double>(built);
  state.counters["final_nodes"] = static_cast<double>(tree.node_count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TreeRequest)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kNanosecond);

}  // namespace
