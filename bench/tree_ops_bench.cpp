// Per-op cost of the core's radix tree by tree size, 10^2 to 10^6 nodes: one "request" is
// match_prefix of a cached two-node path, lock, unlock, the insert of a new leaf and the
// eviction of the least recently used leaf (so the tree keeps its size). Per-request time
// should stay flat as the tree grows (issue 12 target: within 1.5x from 10^2 to 10^6 nodes).
// BM_TreeRequestMemoryFloor measures what the memory hierarchy alone adds to such a request.
//
//   ./build/default/bench/kvsim_tree_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/pools/paged_allocator.h"
#include "core/tree/radix_tree.h"

namespace {

using kvsim::Token;

constexpr int32_t kPage = 4;
constexpr int kLeavesPerGroup = 4;  // a group: one shared prefix node and its leaves

// The benches' random stream (xorshift64): cheap next to what it chooses.
struct XorShift {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  uint64_t operator()() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
};

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
  XorShift next;
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
BENCHMARK(BM_TreeRequest)->RangeMultiplier(10)->Range(100, 1000000)->Unit(benchmark::kNanosecond);

// The memory floor of such a request, whatever the code around it: the loads a radix tree with
// an LRU list cannot avoid, over records of one cache line each (a node four times smaller
// than TreeNode, with nothing else allocated), with no other work. Per request, in dependency
// order: the root's child-index slot -> the group -> the leaf -> the leaf's LRU neighbour (the
// match and its refresh); the index slot of another group -> that group (the insert); the LRU
// front -> its parent (the eviction). The three chains are independent, so the CPU may overlap
// them, but not those of two requests. At 10^2 nodes all of it is cached; at 10^6 each load is
// a cache miss. Its growth from 10^2 to N nodes is the least a radix tree with an exact LRU list
// adds to a request: the match alone is three dependent loads (index slot, group, leaf).
void BM_TreeRequestMemoryFloor(benchmark::State& state) {
  const auto nodes = static_cast<uint64_t>(state.range(0));
  const uint64_t groups = std::max<uint64_t>(1, nodes / (kLeavesPerGroup + 1));
  struct alignas(64) Record {
    uint32_t parent = 0;
    uint32_t lru_next = 0;
    std::array<uint32_t, kLeavesPerGroup> child{};
  };
  struct Slot {
    uint64_t hash = 0;
    uint64_t record = 0;
  };
  XorShift next;
  // Records 0..groups-1 are groups, the rest leaves; the LRU list is a random cycle of leaves.
  const uint64_t leaves = groups * kLeavesPerGroup;
  std::vector<Record> records(groups + leaves);
  std::vector<uint32_t> order(leaves);
  for (uint64_t i = 0; i < leaves; ++i)
    order[i] = static_cast<uint32_t>(groups + i);
  for (uint64_t i = leaves - 1; i > 0; --i)
    std::swap(order[i], order[next() % (i + 1)]);
  for (uint64_t i = 0; i < leaves; ++i)
    records[order[i]].lru_next = order[(i + 1) % leaves];
  for (uint64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < kLeavesPerGroup; ++j) {
      const auto leaf = static_cast<uint32_t>(groups + g * kLeavesPerGroup + j);
      records[g].child[j] = leaf;
      records[leaf].parent = static_cast<uint32_t>(g);
    }
  }
  // The root's child index: one slot per group in a table twice its size, homes scattered.
  uint64_t table_size = 1;
  while (table_size < 2 * groups)
    table_size *= 2;
  std::vector<Slot> index(table_size);
  auto home = [&](uint64_t g) { return (g * 0x9E3779B97F4A7C15ull) >> 20 & (table_size - 1); };
  for (uint64_t g = 0; g < groups; ++g) {
    uint64_t i = home(g);
    while (index[i].hash != 0)
      i = (i + 1) & (table_size - 1);
    index[i] = Slot{g + 1, g};
  }
  auto lookup = [&](uint64_t g) {
    for (uint64_t i = home(g);; i = (i + 1) & (table_size - 1))
      if (index[i].hash == g + 1) return index[i].record;
  };
  uint32_t lru_front = order[0];
  uint64_t sum = 0;
  for (auto _ : state) {
    // Each request starts from the last one's result (0, but the CPU cannot know): a real
    // request runs hundreds of instructions, too many for the CPU to overlap the misses of two
    // requests, while this loop is short enough to. The three chains of one request still may.
    const uint64_t after = sum >> 63;
    const Record& group = records[lookup((next() + after) % groups)];
    const Record& leaf = records[group.child[next() % kLeavesPerGroup]];
    sum += records[leaf.lru_next].parent;
    sum += records[lookup((next() + after) % groups)].child[0];
    const Record& victim = records[lru_front + after];
    sum += records[victim.parent].child[1];
    lru_front = victim.lru_next;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TreeRequestMemoryFloor)
    ->RangeMultiplier(10)
    ->Range(100, 1000000)
    ->Unit(benchmark::kNanosecond);

}  // namespace
