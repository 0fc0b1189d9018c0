// Backend: the one interface through which the core touches memory, streams, events and copies.
//
// Two implementations: CpuBackend (cpu_backend.h), a deterministic emulation in which an
// operation enqueued on a stream runs only when its driver advances that stream; and the CUDA
// backend (cuda/, next issue), with real streams and kernels. The core never knows which.
//
// Semantics every implementation must honour (the backend conformance suite checks them):
//  1. Operations on one stream execute in enqueue order. Streams are otherwise unordered,
//     except through events: wait_event(s, e) makes later work on s wait until e completes.
//  2. An event recorded on stream s completes when all work enqueued on s before it has run.
//  3. allocate(kDevice, bytes, s) is a caching allocator with PyTorch's record_stream rules:
//     a freed block returns to the pool of the stream it was allocated on; if other streams
//     were recorded on it, it is reused only after each of them has passed the point at which
//     free() was called. A block freed without such a record while another stream still reads
//     it may be handed out again at once — that is exactly the seed-000 hazard, and the CPU
//     backend reports the late access as a violation naming both operations.
//  4. Pinned host memory (kPinnedHost) is allocated once and freed only by its owner; it is
//     directly addressable by the host. Device memory is not (host code never dereferences
//     Block::ptr of a device block; it reads device bytes through read_sync).
//  5. upload_async captures the host bytes at enqueue time (pageable-memory semantics).
//
// Thread-safety: none. The core calls a Backend from one thread (the scheduler's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/types.h"

namespace kvsim {

using StreamId = uint32_t;

enum class MemoryKind : uint8_t { kDevice = 0, kPinnedHost = 1 };

constexpr Residency residency_of(MemoryKind k) {
  return k == MemoryKind::kDevice ? Residency::kDevice : Residency::kHost;
}

// A handle to memory owned by the backend. Copyable; it does not own the memory.
struct Block {
  uint64_t id = 0;  // unique per allocation (a reused block gets a new id); 0 = null
  std::byte* ptr = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;

  bool valid() const { return id != 0; }
};

struct EventId {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
};

// How a KV pool lays out layers × slots × item bytes in one block.
enum class KVLayout : uint8_t {
  kLayerFirst = 0,  // [layer][slot][item]; the device layout, and a host option
  kPageFirst = 1,   // [slot][layer][item]; a whole token's KV for all layers is contiguous
};

std::string_view to_string(KVLayout layout);

// A view of a KV pool's storage: enough for a copy kernel to compute addresses.
struct KVPoolView {
  Block block;
  KVLayout layout = KVLayout::kLayerFirst;
  int64_t slot_count = 0;  // slots in the pool, including reserved slot 0
  int32_t layer_count = 0;
  size_t item_bytes = 0;  // bytes of one (layer, slot) item; a multiple of 8

  size_t offset(int32_t layer, SlotIndex slot) const {
    const auto l = static_cast<size_t>(layer);
    const auto s = static_cast<size_t>(slot);
    return layout == KVLayout::kLayerFirst
               ? (l * static_cast<size_t>(slot_count) + s) * item_bytes
               : (s * static_cast<size_t>(layer_count) + l) * item_bytes;
  }
  size_t total_bytes() const {
    return static_cast<size_t>(slot_count) * static_cast<size_t>(layer_count) * item_bytes;
  }
};

// A gather/scatter copy of `count` items per layer: for each layer in [layer_begin, layer_end)
// and each i < count, item (layer, src_indices[i]) of src goes to (layer, dst_indices[i]) of
// dst. Index buffers hold int64 slot indices and are read when the copy executes, as a GPU
// kernel reads them — so they must stay alive (record_stream) until it has run.
struct KVTransfer {
  KVPoolView src;
  KVPoolView dst;
  Block src_indices;
  Block dst_indices;
  size_t count = 0;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;
  std::string label;  // names the operation in violation reports, e.g. "load_back op 7"
};

// A memory-safety violation detected by an emulating backend (the CUDA backend reports none;
// compute-sanitizer is its checker). Stable `kind` names:
//   "reuse_while_in_flight"  an op ran after a block it uses was handed to a new owner;
//   "illegal_address"        an op's index or range fell outside the block it addresses;
//   "use_after_free"         an op was enqueued on a block that had already been freed;
//   "unordered_read"         an op reads bytes whose last writer, on another stream, is not
//                            ordered before it by an event wait or an observed completion.
struct BackendViolation {
  std::string kind;
  std::string detail;  // names both operations involved
};

// One live handout: a block allocate() returned and free() has not yet been given.
struct LiveBlock {
  Block block;
  std::string label;  // as passed to allocate(): owners recognise their blocks by it
};

// The backend's memory as a walk of its blocks finds it, beside its own counters
// (Backend::memory_census). Sizes are reserved (rounded) bytes. A device block is live (handed
// out), pending (freed, but a stream recorded on it by record_stream has not yet passed the
// free) or cached (reusable); a pinned host block is live, pending (the CUDA backend waits
// for its streams before releasing it) or released (no longer counted).
struct MemoryCensus {
  std::vector<LiveBlock> live;       // every live handout, by ascending id
  size_t device_reserved_bytes = 0;  // the backend's counter: live + pending + cached
  size_t device_live_bytes = 0;
  size_t device_pending_bytes = 0;
  size_t device_cached_bytes = 0;
  size_t device_live_blocks = 0;
  size_t device_pending_blocks = 0;
  size_t device_cached_blocks = 0;
  size_t host_in_use_bytes = 0;  // the backend's counter: live + pending
  size_t host_live_bytes = 0;
  size_t host_pending_bytes = 0;
  size_t host_live_blocks = 0;
  size_t host_pending_blocks = 0;
  // "" when the walk and the counters add up (every block in exactly one state, the states'
  // sums equal to the counters, each deferred free waiting on as many streams as its queues
  // hold for it); else the first discrepancy.
  std::string problem;

  // The walk's tallies, shared by the CPU and CUDA allocators: a live block (its handout),
  // a block waiting behind record_stream, a cached device block; `capacity` is the block's.
  void add_live(LiveBlock handout, size_t capacity);
  void add_pending(MemoryKind kind, size_t capacity);
  void add_cached(size_t capacity);
  // Once the walk is done: sorts `live` by id, and checks that each state's bytes add up to the
  // backend's counters and the cached blocks are the allocator's `pool_entries`. The first
  // discrepancy goes to `problem` when that is still empty.
  void finish(size_t pool_entries);
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;

  // --- Streams and events ---
  virtual StreamId compute_stream() const = 0;  // the stream model forwards run on
  virtual StreamId create_stream(std::string_view name) = 0;
  virtual EventId record_event(StreamId stream) = 0;
  virtual void wait_event(StreamId stream, EventId event) = 0;
  virtual bool query_event(EventId event) = 0;
  virtual void synchronize_event(EventId event) = 0;
  virtual void synchronize_stream(StreamId stream) = 0;
  virtual void synchronize() = 0;

  // --- Memory ---
  // Returns a null Block when memory is exhausted (an operating error, not a crash).
  virtual Block allocate(MemoryKind kind, size_t bytes, StreamId stream,
                         std::string_view label) = 0;
  virtual void record_stream(const Block& block, StreamId stream) = 0;
  virtual void free(const Block& block) = 0;
  // What the backend holds now (MemoryCensus), for conservation checks of its owners
  // (CacheController::memory_problem, invariant backend.memory_owned). Read only: it runs,
  // processes and synchronizes nothing (on CUDA no API call at all). O(blocks).
  virtual MemoryCensus memory_census() const = 0;

  // --- Data movement, enqueued on a stream ---
  virtual void copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                          size_t src_offset, size_t bytes, std::string_view label) = 0;
  virtual void upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                            std::span<const std::byte> host_bytes, std::string_view label) = 0;
  virtual void transfer_kv_async(StreamId stream, const KVTransfer& transfer) = 0;

  // Synchronous read of any block: waits for all streams (synchronize()), then copies the
  // bytes out. For checks, tests and the simulator's content oracle; never on a hot path.
  virtual std::vector<std::byte> read_sync(const Block& block, size_t offset, size_t bytes) = 0;

  // Violations seen so far (always empty for real hardware backends).
  virtual const std::vector<BackendViolation>& violations() const = 0;
};

}  // namespace kvsim
