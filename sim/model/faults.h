// Fault injection in FoundationDB's BUGGIFY style: each site is enabled for a fraction of seeds
// (decided once, from the seed) and, where enabled, fires with a per-seed probability each time
// the simulator passes it. Most seeds therefore see a few kinds of trouble, often — which finds
// more bugs than every kind of trouble, rarely.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include "sim/base/rng.h"
#include "sim/config/scenario.h"

namespace kvsim::sim {

enum class FaultSite : uint8_t {
  kCopyDelay = 0,      // a copy stream makes no progress this iteration
  kAckDefer = 1,       // the poll point is skipped this iteration
  kAllocFail = 2,      // a compute step's allocation fails (out of memory)
  kAbortWaiting = 3,   // a waiting (possibly prefetching) request is aborted
  kAbortRunning = 4,   // a running request is aborted
  kForcedRetract = 5,  // a running request is retracted
  kStorageStall = 6,   // storage workers make no progress this iteration
  kComputeStall = 7,   // the forward of this iteration is skipped (the batch is held)
  // Pool exhaustion on the paths that allocate outside a compute step (an inject op holds every
  // free page of the pool for the next op, so the core sees a genuinely full pool).
  kHostFullBackup = 8,     // host pool full during a finish or prefill chunk (backups, write-back)
  kHostFullLoadBack = 9,   // host pool full during an admission with load-back
  kHostFullPrefetch = 10,  // host pool full during a poll (prefetch hits take host pages there)
  kDeviceFullLoadBack = 11,  // device pool full during an admission with load-back
  kEventQueryDelay = 12,     // a poll's event queries answer "not yet" for finished copies
  // 13..15: free for the next sites. 16..22: the storage tier's faults, each injected into one
  // storage step by FaultyStorage (sim/model/storage_faults.h) and recorded in its op.
  kStorageReadError = 16,   // a page read fails (EIO)
  kStorageVanish = 17,      // a page the hit query found is gone when read
  kStorageCorrupt = 18,     // a page is damaged in the store before it is read
  kStorageWrongSize = 19,   // a read returns a payload of the wrong size
  kStorageWriteError = 20,  // a page write fails (ENOSPC, EIO)
  kStorageTornWrite = 21,   // a page write "succeeds" but leaves a torn page
  kStorageSlowIo = 22,      // one storage worker's step makes no progress
};
inline constexpr size_t kFaultSites = 24;

std::string_view to_string(FaultSite site);

class Faults {
 public:
  Faults(const FaultOptions& options, uint64_t seed);
  bool enabled(FaultSite site) const { return enabled_[static_cast<size_t>(site)]; }
  // True when the site is enabled for this seed and fires now.
  bool fire(FaultSite site);
  uint64_t fired(FaultSite site) const { return fired_[static_cast<size_t>(site)]; }
  // Called each time a site fires (the timeline export); none by default.
  void set_on_fire(std::function<void(FaultSite)> on_fire) { on_fire_ = std::move(on_fire); }

 private:
  Rng rng_;
  double probability_;
  std::array<bool, kFaultSites> enabled_{};
  std::array<uint64_t, kFaultSites> fired_{};
  std::function<void(FaultSite)> on_fire_;
};

}  // namespace kvsim::sim
