// The simulator's full check covers two core structures outside HiCache's own walk (issue 28's
// blind spots 1 and 2): PD's metadata slots (MetadataBuffers::sanity_check, "metadata.free_list"
// and "metadata.stale_field") and the CPU backend's caching allocator (CachingAllocator::check,
// "backend.allocator"). Each planted corruption is one nothing on the run's path asserts on, so
// only those checks can see it: it goes in after an op of a PD run, and the run must then fail by
// the check's name at the next full check, not at the end and not as a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/pools/metadata_buffers.h"
#include "sim/campaign/runner.h"
#include "sim/config/scenario.h"
#include "sim/model/core_cache.h"
#include "sim/model/executor.h"

namespace kvsim {

// Reaches into the slots as tests/core/pools/metadata_buffers_test.cpp does (another executable).
struct MetadataBuffersTestPeer {
  static std::vector<MetadataSlot>& free_slots(MetadataBuffers& m) { return m.free_slots_; }
  static std::vector<uint8_t>& allocated(MetadataBuffers& m) { return m.allocated_; }
  static MetadataRecord& row(MetadataBuffers& m, MetadataSlot slot) {
    return *m.rows_[static_cast<size_t>(slot)];
  }
};

namespace sim {
namespace {

// After op `at`, corrupts kvsim's core once (the run's checks of op `at` have already passed).
class PlantAfter final : public ExecutorObserver {
 public:
  PlantAfter(size_t at, std::function<void(KvsimCoreCache&)> plant)
      : at_(at), plant_(std::move(plant)) {}
  void attach(Executor& e) {
    executor_ = &e;
    e.set_observer(this);
  }
  void before_op(size_t, const Op&) override {}
  void after_op(size_t index, const Op&, const OpOutcome&) override {
    if (index != at_ || executor_ == nullptr || executor_->failed()) return;
    ASSERT_NE(executor_->core(), nullptr);
    plant_(*executor_->core());
    planted_ = true;
  }
  void on_fault(std::string_view) override {}
  void on_executor_gone() override { executor_ = nullptr; }
  bool planted() const { return planted_; }

 private:
  size_t at_;
  std::function<void(KvsimCoreCache&)> plant_;
  Executor* executor_ = nullptr;
  bool planted_ = false;
};

constexpr size_t kPlantAfter = 200;  // well into the run: requests admitted, retracted, resumed

Scenario pd_scenario() {
  std::string path = KVSIM_SOURCE_DIR;
  path += "/scenarios/pd_retract_resume_sparse.json";
  return load_scenario(path);
}

// Runs seed 1 of the PD scenario with `plant` put in after op kPlantAfter.
RunResult run_planted(const Scenario& s, PlantAfter& plant) {
  return run_scenario(
      RunRequest{.scenario = &s, .seed = 1, .setup = [&](Executor& e) { plant.attach(e); }});
}

// The slot nothing hands out next: slots are allocated and freed within one admit, LIFO, so the
// front of the free list is never reused in this run and no alloc() trips over it first.
MetadataSlot untouched_free_slot(KvsimCoreCache& core) {
  MetadataBuffers* m = core.metadata_buffers();
  EXPECT_NE(m, nullptr) << "not a PD run";
  const std::vector<MetadataSlot>& list = MetadataBuffersTestPeer::free_slots(*m);
  EXPECT_GE(list.size(), 2u);
  return list.front();
}

void expect_caught_later(const RunResult& r, const PlantAfter& plant, const std::string& invariant,
                         const std::string& detail) {
  ASSERT_TRUE(plant.planted());
  ASSERT_TRUE(r.violation) << "the corruption went unnoticed";
  EXPECT_EQ(r.violation->invariant, invariant) << r.violation->detail;
  EXPECT_NE(r.violation->detail.find(detail), std::string::npos) << r.violation->detail;
  EXPECT_GT(r.violation->op_index, kPlantAfter + 1);   // after the plant, not before
  EXPECT_LT(r.violation->op_index, kPlantAfter + 20);  // at a full check, not at the end
}

TEST(SideStructureChecks, APdRunWithoutAPlantIsClean) {
  const Scenario s = pd_scenario();
  PlantAfter nothing(kPlantAfter, [](KvsimCoreCache& core) {
    // The run uses the slots and the allocator: both checks have something to look at.
    EXPECT_NE(core.metadata_buffers(), nullptr);
    EXPECT_GT(core.backend().allocator().device_bytes_reserved(), 0u);
  });
  const RunResult r = run_planted(s, nothing);
  ASSERT_TRUE(nothing.planted());
  EXPECT_FALSE(r.violation) << r.violation->invariant << ": " << r.violation->detail;
  EXPECT_GT(r.stats.full_checks, static_cast<int64_t>(kPlantAfter));
}

// A slot both free-listed and marked allocated (owned): the free list disagrees with the owners.
TEST(SideStructureChecks, CatchesAMetadataSlotFreeAndOwnedAtOnce) {
  const Scenario s = pd_scenario();
  MetadataSlot slot = -1;
  PlantAfter plant(kPlantAfter, [&](KvsimCoreCache& core) {
    slot = untouched_free_slot(core);
    MetadataBuffersTestPeer::allocated(*core.metadata_buffers())[static_cast<size_t>(slot)] = 1;
  });
  const RunResult r = run_planted(s, plant);
  expect_caught_later(r, plant, "metadata.free_list",
                      "allocated slot is free-listed (slot " + std::to_string(slot) + ")");
}

// A free slot still holding its last owner's bootstrap room (SGLang #27374's field).
TEST(SideStructureChecks, CatchesAStaleFieldInAFreeMetadataSlot) {
  const Scenario s = pd_scenario();
  MetadataSlot slot = -1;
  PlantAfter plant(kPlantAfter, [&](KvsimCoreCache& core) {
    slot = untouched_free_slot(core);
    MetadataBuffersTestPeer::row(*core.metadata_buffers(), slot).bootstrap_room = 42;
  });
  const RunResult r = run_planted(s, plant);
  expect_caught_later(r, plant, "metadata.stale_field",
                      "bootstrap_room from its last owner (slot " + std::to_string(slot) + ")");
}

// The allocator's state is private and has no test peer; physical() hands out a const view of a
// block the (non-const) allocator owns, so writing through const_cast is defined here.
PhysicalBlock& mutable_block(KvsimCoreCache& core, PhysicalIndex i) {
  return const_cast<PhysicalBlock&>(core.backend().allocator().physical(i));
}

// The first physical block in `state` of kind `kind`, or nullopt.
std::optional<PhysicalIndex> find_block(KvsimCoreCache& core, MemoryKind kind,
                                        PhysicalState state) {
  const CachingAllocator& a = core.backend().allocator();
  // The allocator does not list its blocks; handout ids are dense (1, 2, ...) and each names one.
  for (uint64_t id = 1; a.physical_of(id).has_value(); ++id) {
    const PhysicalIndex p = *a.physical_of(id);
    if (a.physical(p).kind == kind && a.physical(p).state == state) return p;
  }
  return std::nullopt;
}

// A live device block whose size grew behind the allocator's back: the reserved bytes no longer
// add up.
TEST(SideStructureChecks, CatchesCachingAllocatorAccountingOff) {
  const Scenario s = pd_scenario();
  PlantAfter plant(kPlantAfter, [](KvsimCoreCache& core) {
    const std::optional<PhysicalIndex> live =
        find_block(core, MemoryKind::kDevice, PhysicalState::kLive);
    ASSERT_TRUE(live);
    mutable_block(core, *live).capacity += CachingAllocator::kRoundBytes;
  });
  const RunResult r = run_planted(s, plant);
  // HiCache's full check sees it first: its backend.memory_owned census starts with the
  // allocator's own check (the simulator's backend.allocator comes after the core's walk).
  expect_caught_later(r, plant, "backend.memory_owned", "device bytes accounting");
}

// A block handed out and marked cached at once (what a free that filed the block back but kept
// its handout would leave): the block's state disagrees with its live handout. The run only asks
// whether a handout is live, never a block's state, so only the check notices.
TEST(SideStructureChecks, CatchesALiveBlockMarkedCached) {
  const Scenario s = pd_scenario();
  PhysicalIndex block = 0;
  PlantAfter plant(kPlantAfter, [&](KvsimCoreCache& core) {
    const std::optional<PhysicalIndex> live =
        find_block(core, MemoryKind::kDevice, PhysicalState::kLive);
    ASSERT_TRUE(live);
    block = *live;
    mutable_block(core, block).state = PhysicalState::kCached;
  });
  const RunResult r = run_planted(s, plant);
  expect_caught_later(r, plant, "backend.memory_owned",
                      "physical block " + std::to_string(block) + ": live state");
}

}  // namespace
}  // namespace sim
}  // namespace kvsim
