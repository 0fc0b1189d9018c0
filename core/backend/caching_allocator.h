// CachingAllocator: the bookkeeping half of CpuBackend's memory — physical blocks, handouts,
// per-stream free pools and record_stream — with PyTorch CUDACachingAllocator's rules.
//
// It never runs or inspects operations: it is told how far each stream has got through a
// StreamProgress, exactly as PyTorch learns it by querying CUDA events.
//
// Rules (shared/reference/testing-anchors.md §5.2):
//  - device sizes are rounded up to 512 bytes; free pools are keyed by (stream, size) and a
//    cached block is handed only to a later allocation on its home (allocation) stream, best
//    fit: the smallest cached size >= the request, then the lowest physical index;
//  - record_stream(b, s) is ignored when s is b's home stream, else s joins b's stream_uses;
//  - free(b) with no stream_uses returns b to its home pool at once; otherwise it snapshots,
//    for each used stream, how many ops that stream has enqueued (an event recorded now), and
//    b returns to the pool only when every snapshot has executed. Pending frees are processed
//    lazily at the start of every allocate, per stream in FIFO order, stopping at the first
//    incomplete one (process_events);
//  - pinned host blocks are never cached: free releases their memory.
//
// Invariants:
//  1. every handout has a fresh id (ids are dense, 1, 2, ...); a physical block has at most
//     one live handout;
//  2. a physical block is in exactly one state: live, freed-pending-events, cached (in exactly
//     one pool entry) or released;
//  3. reserved device bytes and in-use host bytes never exceed their limits (0 = unlimited);
//     cached device blocks stay reserved (there is no empty_cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/backend/backend.h"

namespace kvsim {

// How far each stream has got: ops enqueued so far and ops executed so far.
class StreamProgress {
 public:
  virtual uint64_t enqueued(StreamId stream) const = 0;
  virtual uint64_t executed(StreamId stream) const = 0;

 protected:
  ~StreamProgress() = default;
};

using PhysicalIndex = uint32_t;

// One handout of a physical block, remembered to name it in violation reports.
struct HandoutRecord {
  uint64_t id = 0;
  StreamId stream = 0;
  std::string label;
};

enum class PhysicalState : uint8_t { kLive, kPendingEvents, kCached, kReleased };

// Frees what calloc returned.
struct CallocFree {
  void operator()(std::byte* p) const noexcept;
};

struct PhysicalBlock {
  // calloc'd: a large block comes from the OS as zero pages that cost no memory until first
  // touched, so a pool sized for the worst case costs what its slots actually use.
  std::unique_ptr<std::byte[], CallocFree> data;  // null once released
  size_t capacity = 0;                            // rounded bytes
  MemoryKind kind = MemoryKind::kDevice;
  StreamId home = 0;  // the allocation stream: only its later allocations reuse the block
  PhysicalState state = PhysicalState::kLive;
  uint64_t live_id = 0;    // the live handout; 0 when not live
  size_t live_bytes = 0;   // bytes requested by the live handout
  uint64_t latest_id = 0;  // the most recent handout, kept after it is freed
  std::set<StreamId> stream_uses;
  uint32_t events_pending = 0;          // snapshots still to pass before it is cached again
  std::vector<HandoutRecord> handouts;  // ascending ids; the last one is latest_id
};

struct CachingAllocatorLimits {
  size_t device_bytes_max = 0;  // 0 = unlimited
  size_t host_bytes_max = 0;    // 0 = unlimited
};

class CachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;

  explicit CachingAllocator(CachingAllocatorLimits limits) : limits_(limits) {}

  struct Handout {
    Block block;                 // null when the limit would be exceeded
    PhysicalIndex physical = 0;  // meaningful only when block is valid
    bool reused = false;         // the physical block held an earlier handout
  };
  Handout allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label,
                   const StreamProgress& progress);
  void record_stream(const Block& block, StreamId stream);
  void free(const Block& block, const StreamProgress& progress);

  // The physical block that handout `id` was carved from; nullopt if `id` was never issued.
  std::optional<PhysicalIndex> physical_of(uint64_t id) const;
  const PhysicalBlock& physical(PhysicalIndex index) const;
  std::byte* data(PhysicalIndex index);
  bool is_live(const Block& block) const;
  // The handout that took `index` over after handout `id` (the first later one), if known.
  const HandoutRecord* successor(PhysicalIndex index, uint64_t id) const;
  // Forgets handout records older than `oldest_needed` (the last record is always kept).
  void forget_handouts_before(PhysicalIndex index, uint64_t oldest_needed);

  size_t device_bytes_reserved() const { return device_bytes_; }
  size_t host_bytes_in_use() const { return host_bytes_; }
  size_t cached_blocks() const { return pool_.size(); }
  size_t pending_frees() const;
  // "" when the bookkeeping is consistent, else the first problem (O(blocks)).
  std::string check() const;
  // Every live handout and the bytes and blocks in each state, against the counters
  // (backend.h MemoryCensus; its problem includes check()'s). Read only. O(blocks + frees).
  MemoryCensus census(const StreamProgress& progress) const;

 private:
  struct PendingFree {
    uint64_t target;  // the stream has executed this many ops when the snapshot is passed
    PhysicalIndex physical;
  };

  PhysicalBlock& live_block(const Block& block, const char* what);
  void process_events(const StreamProgress& progress);
  void cache(PhysicalIndex index);
  std::optional<PhysicalIndex> take_cached(StreamId stream, size_t rounded);
  std::optional<PhysicalIndex> create(MemoryKind kind, size_t rounded, StreamId stream);

  CachingAllocatorLimits limits_;
  std::vector<PhysicalBlock> blocks_;
  std::vector<PhysicalIndex> physical_of_id_;                   // handout id - 1 → physical block
  std::set<std::tuple<StreamId, size_t, PhysicalIndex>> pool_;  // (home, capacity, index)
  std::map<StreamId, std::deque<PendingFree>> pending_;         // per stream, FIFO
  size_t device_bytes_ = 0;
  size_t host_bytes_ = 0;
};

}  // namespace kvsim
