#include "sim/model/faults.h"

namespace kvsim::sim {

std::string_view to_string(FaultSite site) {
  switch (site) {
    case FaultSite::kCopyDelay:
      return "copy_delay";
    case FaultSite::kAckDefer:
      return "ack_defer";
    case FaultSite::kAllocFail:
      return "alloc_fail";
    case FaultSite::kAbortWaiting:
      return "abort_waiting";
    case FaultSite::kAbortRunning:
      return "abort_running";
    case FaultSite::kForcedRetract:
      return "forced_retract";
    case FaultSite::kStorageStall:
      return "storage_stall";
    case FaultSite::kComputeStall:
      return "compute_stall";
    case FaultSite::kHostFullBackup:
      return "host_full_backup";
    case FaultSite::kHostFullLoadBack:
      return "host_full_load_back";
    case FaultSite::kHostFullPrefetch:
      return "host_full_prefetch";
    case FaultSite::kDeviceFullLoadBack:
      return "device_full_load_back";
    case FaultSite::kEventQueryDelay:
      return "event_query_delay";
    case FaultSite::kStorageReadError:
      return "storage_read_error";
    case FaultSite::kStorageVanish:
      return "storage_vanish";
    case FaultSite::kStorageCorrupt:
      return "storage_corrupt";
    case FaultSite::kStorageWrongSize:
      return "storage_wrong_size";
    case FaultSite::kStorageWriteError:
      return "storage_write_error";
    case FaultSite::kStorageTornWrite:
      return "storage_torn_write";
    case FaultSite::kStorageSlowIo:
      return "storage_slow_io";
  }
  return "?";
}

Faults::Faults(const FaultOptions& options, uint64_t seed)
    : rng_(rng_stream(seed, "faults")), probability_(options.fire_probability) {
  Rng pick = rng_stream(seed, "faults.sites");
  for (size_t i = 0; i < kFaultSites; ++i) {
    enabled_[i] = options.enabled && pick.chance(options.site_probability);
  }
}

bool Faults::fire(FaultSite site) {
  const auto i = static_cast<size_t>(site);
  if (!enabled_[i]) return false;
  double p = probability_;
  if (site == FaultSite::kAbortWaiting || site == FaultSite::kAbortRunning ||
      site == FaultSite::kForcedRetract) {
    p *= 0.1;  // per iteration these would otherwise kill most requests
  }
  if (i >= static_cast<size_t>(FaultSite::kStorageWriteError) &&
      i <= static_cast<size_t>(FaultSite::kStorageSlowIo)) {
    p *= 0.25;  // per storage step, busy or not: most pages still make it through
  }
  if (!rng_.chance(p)) return false;
  ++fired_[i];
  if (on_fire_) on_fire_(site);
  return true;
}

}  // namespace kvsim::sim
