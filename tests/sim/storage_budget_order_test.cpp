// storage.budget_order: the reference of which pages a budgeted store evicts, and in what order
// (sim/model/storage_budget_reference.h), against the real stores (clean), against stores with
// the order planted wrong (caught), and on whole runs with storage faults (clean).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "sim/base/rng.h"
#include "sim/campaign/covering_array.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/swarm.h"
#include "sim/model/storage_faults.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {
namespace {

PageDigest key(uint64_t i) {
  PageDigest d{};
  for (size_t b = 0; b < 8; ++b)
    d[b] = static_cast<uint8_t>(i >> (8 * b));
  d[31] = 0x5a;
  return d;
}

std::vector<std::byte> payload(size_t n, uint64_t fill) {
  return std::vector<std::byte>(n, static_cast<std::byte>(fill));
}

TEST(StorageBudgetReference, EvictsLeastRecentlyUsedFirstAndHitsCount) {
  StorageBudgetReference ref(30, 0, 0);  // three pages of 10 bytes
  for (uint64_t i = 1; i <= 3; ++i)
    ref.apply_set(ref.plan_set(key(i), 10), key(i), 10, true);
  ref.hit(key(1));  // 2 is now the oldest
  auto plan = ref.plan_set(key(4), 10);
  ASSERT_FALSE(plan.refused);
  EXPECT_EQ(plan.victims, std::vector<PageDigest>{key(2)});
  ref.apply_set(plan, key(4), 10, true);
  plan = ref.plan_set(key(5), 25);  // needs 25 of 30: 3, 1 and 4 go, oldest first
  EXPECT_EQ(plan.victims, (std::vector<PageDigest>{key(3), key(1), key(4)}));
  EXPECT_TRUE(ref.plan_set(key(6), 31).refused);
  StorageBudgetReference pages(0, 2, 0);  // a page budget: two pages whatever their size
  pages.apply_set(pages.plan_set(key(1), 100), key(1), 100, true);
  pages.apply_set(pages.plan_set(key(2), 100), key(2), 100, true);
  EXPECT_EQ(pages.plan_set(key(3), 1).victims, std::vector<PageDigest>{key(1)});
}

// Drives `store` (through the fault decorator and the check) with a seeded mix of sets of pages
// of several sizes, gets and removes over a small key space; returns the first divergence.
std::optional<std::string> drive(StorageBackend& store, uint64_t capacity, uint64_t overhead,
                                 std::function<uint64_t()> evictions, int ops,
                                 uint64_t* evicted = nullptr, bool only_budget_refuses = true) {
  FaultyStorage faulty(store);
  faulty.check_budget_order(std::make_unique<BudgetOrderCheck>(
      store, StorageBudgetReference(capacity, 0, overhead), evictions, only_budget_refuses));
  Rng rng = rng_stream(7, "budget-order-test");
  std::vector<std::byte> out;
  for (int i = 0; i < ops && !faulty.budget_order_broken(); ++i) {
    const uint64_t k = rng.below(24);
    const uint64_t what = rng.below(10);
    if (what < 5) {
      faulty.set(key(k), payload(8 + 8 * (k % 3), k));
    } else if (what < 9) {
      faulty.get(key(k), &out);
    } else {
      faulty.remove(key(k));
    }
  }
  if (evicted) *evicted = evictions();
  return faulty.budget_order_broken();
}

TEST(StorageBudgetOrder, MemoryStoreAgreesWithTheReference) {
  MemoryStorage store(0, 96);
  uint64_t evicted = 0;
  EXPECT_EQ(drive(
                store, 96, 0, [&] { return store.evictions(); }, 5000, &evicted),
            std::nullopt);
  EXPECT_GT(evicted, 100u) << "the budget must bite for the comparison to mean anything";
}

TEST(StorageBudgetOrder, FileStoreAgreesWithTheReference) {
  TempDir dir("budget-order-test");
  const uint64_t capacity = 4 * (FileStorage::kHeaderBytes + 16);
  FileStorage store(dir.path(), FileStorageOptions{.capacity_bytes = capacity});
  ASSERT_TRUE(store.ok()) << store.error();
  uint64_t evicted = 0;
  EXPECT_EQ(drive(
                store, capacity, FileStorage::kHeaderBytes, [&] { return store.evictions(); }, 600,
                &evicted, /*only_budget_refuses=*/false),
            std::nullopt);
  EXPECT_GT(evicted, 20u);
}

// A store with a byte budget whose eviction order is a parameter: the planted bugs.
class PlantedBudgetStore final : public StorageBackend {
 public:
  enum class Bug { kNone, kMostRecentFirst, kGetNotAUse, kOneTooMany, kRefusesAFullFit };
  PlantedBudgetStore(uint64_t capacity, Bug bug) : capacity_(capacity), bug_(bug) {}
  std::string_view name() const override { return "planted"; }
  bool exists(const PageDigest& k) override { return pages_.count(k) != 0; }
  StorageStatus get(const PageDigest& k, std::vector<std::byte>* out) override {
    auto it = pages_.find(k);
    if (it == pages_.end()) return StorageStatus::kMiss;
    if (bug_ != Bug::kGetNotAUse) use(k);
    *out = it->second;
    return StorageStatus::kOk;
  }
  StorageStatus set(const PageDigest& k, std::span<const std::byte> p) override {
    if (pages_.count(k) != 0) return StorageStatus::kOk;
    if (p.size() > capacity_ || (bug_ == Bug::kRefusesAFullFit && p.size() == capacity_)) {
      return StorageStatus::kIoError;
    }
    bool extra = bug_ == Bug::kOneTooMany;
    while (bytes_ + p.size() > capacity_ || (extra && !order_.empty())) {
      if (bytes_ + p.size() <= capacity_) extra = false;
      const auto victim =
          bug_ == Bug::kMostRecentFirst ? std::prev(order_.end())->second : order_.begin()->second;
      remove(victim);
      ++evictions_;
    }
    pages_[k].assign(p.begin(), p.end());
    bytes_ += p.size();
    use(k);
    return StorageStatus::kOk;
  }
  void remove(const PageDigest& k) override {
    auto it = pages_.find(k);
    if (it == pages_.end()) return;
    bytes_ -= it->second.size();
    order_.erase(last_use_[k]);
    last_use_.erase(k);
    pages_.erase(it);
  }
  size_t page_count() const override { return pages_.size(); }
  Usage usage() const override { return {pages_.size(), bytes_}; }
  uint64_t evictions() const { return evictions_; }

 private:
  void use(const PageDigest& k) {
    if (auto it = last_use_.find(k); it != last_use_.end()) order_.erase(it->second);
    last_use_[k] = ++clock_;
    order_[clock_] = k;
  }
  uint64_t capacity_;
  Bug bug_;
  uint64_t bytes_ = 0, clock_ = 0, evictions_ = 0;
  std::map<PageDigest, std::vector<std::byte>> pages_;
  std::map<PageDigest, uint64_t> last_use_;
  std::map<uint64_t, PageDigest> order_;
};

std::optional<std::string> drive_planted(PlantedBudgetStore::Bug bug) {
  PlantedBudgetStore store(96, bug);
  return drive(
      store, 96, 0, [&] { return store.evictions(); }, 5000);
}

TEST(StorageBudgetOrder, TheUnplantedStoreIsClean) {
  EXPECT_EQ(drive_planted(PlantedBudgetStore::Bug::kNone), std::nullopt);
}

TEST(StorageBudgetOrder, TheOrderFlippedIsCaught) {
  const auto broken = drive_planted(PlantedBudgetStore::Bug::kMostRecentFirst);
  ASSERT_TRUE(broken.has_value());
  EXPECT_NE(broken->find("least-recently-used reference"), std::string::npos) << *broken;
}

TEST(StorageBudgetOrder, AGetThatIsNotAUseIsCaught) {
  EXPECT_TRUE(drive_planted(PlantedBudgetStore::Bug::kGetNotAUse).has_value());
}

TEST(StorageBudgetOrder, EvictingMoreThanNeededIsCaught) {
  const auto broken = drive_planted(PlantedBudgetStore::Bug::kOneTooMany);
  ASSERT_TRUE(broken.has_value());
  EXPECT_NE(broken->find("evicted"), std::string::npos) << *broken;
}

// A page exactly the budget's size fits (the store then holds it alone); refusing it is caught.
TEST(StorageBudgetOrder, RefusingAPageThatFitsIsCaught) {
  for (auto bug : {PlantedBudgetStore::Bug::kNone, PlantedBudgetStore::Bug::kRefusesAFullFit}) {
    PlantedBudgetStore store(16, bug);
    const auto broken = drive(store, 16, 0, [&] { return store.evictions(); }, 2000);
    if (bug == PlantedBudgetStore::Bug::kNone) {
      EXPECT_EQ(broken, std::nullopt);
    } else {
      ASSERT_TRUE(broken.has_value());
      EXPECT_NE(broken->find("but the page fits the budget"), std::string::npos) << *broken;
    }
  }
}

// Whole runs: swarm seeds whose covering-array row asks for a budgeted store (memory or file),
// with their storage faults, run clean, and their stores do evict.
TEST(StorageBudgetOrder, BudgetedSwarmRunsAreClean) {
  uint64_t evictions = 0;
  int runs = 0;
  for (uint64_t seed = 1; runs < 6 && seed < 2000; ++seed) {
    if (swarm_row(seed)[kFactorStorage] < 2) continue;
    Scenario s = draw_scenario(seed);
    s.workload.requests = std::min<int64_t>(s.workload.requests, 60);
    const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = seed});
    ASSERT_TRUE(r.ok()) << "swarm seed " << seed << ": " << r.violation->invariant << ": "
                        << r.violation->detail;
    evictions += r.storage.evictions;
    ++runs;
  }
  EXPECT_EQ(runs, 6);
  EXPECT_GT(evictions, 0u);
}

}  // namespace
}  // namespace kvsim::sim
