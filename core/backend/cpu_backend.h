// CpuBackend: a deterministic emulation of a GPU's memory, streams, events and copy kernels.
//
// An operation enqueued on a stream runs only when the driver (a test, the simulator) advances
// that stream with step(); nothing runs on its own, so every completion order can be produced
// on purpose and replayed. Blocking calls (synchronize*, drain, read_sync) advance streams
// round-robin in stream-id order, one op per runnable stream per pass, until their condition
// holds; if nothing can run first, that is a deadlock (KV_ASSERT).
//
// Memory comes from a CachingAllocator (caching_allocator.h: PyTorch's record_stream rules);
// every block is real host memory. Each handout of a block gets a fresh Block::id, and a block
// handed out again is filled with poison bytes (0xDB): at once when no queued op on its
// allocation stream still uses it, else in that stream's order, so work the stream holds from
// the previous owner still sees the old bytes. Every op remembers the handouts it touches; when
// it runs it checks they are still those handouts. If one was handed to someone else in
// between, the op does not touch memory and a "reuse_while_in_flight" violation names both the
// op and the allocation that took the block over — the emulated form of the illegal memory
// access seed 000 caused on real GPUs.
//
// Violations (backend.h): reuse_while_in_flight, illegal_address (an index or range outside
// its block: refused, never performed), use_after_free (an op enqueued on a freed block, or
// run on a released pinned block), unordered_read (an op reads bytes whose last writer is an
// op on another stream that no event orders before it: cpu_ordering.h; decided at enqueue,
// whatever order the driver then runs the streams in). Misuse of the API itself (unknown stream or
// event, a null or forged Block, double free) is a programmer error: KV_ASSERT.
//
// Invariants:
//  1. a stream's ops run in enqueue order, each exactly once, and only inside step();
//  2. an event completes exactly when its stream has run every op enqueued before it;
//  3. no op reads or writes outside the live handouts it was enqueued with;
//  4. given the same calls, the same ops run in the same order and report the same violations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/caching_allocator.h"
#include "core/backend/cpu_kernels.h"
#include "core/backend/cpu_op.h"
#include "core/backend/cpu_ordering.h"
#include "core/backend/cpu_streams.h"

namespace kvsim {

struct CpuBackendOptions {
  size_t device_bytes_max = 0;  // 0 = unlimited; cached blocks count (they stay reserved)
  size_t host_bytes_max = 0;    // 0 = unlimited
};

// Watches a CpuBackend (the simulator's timeline export, sim/report/timeline.h): ops as they are
// enqueued and as they run, and events as they are recorded. Off (null) by default; the
// backend then pays one pointer test per call.
class CpuBackendObserver {
 public:
  virtual ~CpuBackendObserver() = default;
  virtual void on_enqueue(const CpuOp& op) = 0;
  virtual void on_run(const CpuOp& op) = 0;  // after it ran (or was refused)
  virtual void on_record(StreamId stream, EventId event) = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string_view name() const override { return "cpu"; }
  StreamId compute_stream() const override { return 0; }
  StreamId create_stream(std::string_view name) override;
  EventId record_event(StreamId stream) override;
  void wait_event(StreamId stream, EventId event) override;
  bool query_event(EventId event) override;
  void synchronize_event(EventId event) override;
  void synchronize_stream(StreamId stream) override;
  void synchronize() override;

  Block allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label) override;
  void record_stream(const Block& block, StreamId stream) override;
  void free(const Block& block) override;
  MemoryCensus memory_census() const override { return allocator_.census(streams_); }

  void copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                  size_t src_offset, size_t bytes, std::string_view label) override;
  void upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                    std::span<const std::byte> host_bytes, std::string_view label) override;
  void transfer_kv_async(StreamId stream, const KVTransfer& transfer) override;
  std::vector<std::byte> read_sync(const Block& block, size_t offset, size_t bytes) override;

  const std::vector<BackendViolation>& violations() const override { return violations_; }
  void clear_violations() { violations_.clear(); }

  // --- Driver API (not part of Backend) ---
  void set_observer(CpuBackendObserver* observer) { observer_ = observer; }
  bool step(StreamId stream);  // runs the head op if runnable; false if empty or blocked
  bool runnable(StreamId stream) const;
  size_t pending_ops(StreamId stream) const;
  size_t pending_ops() const;
  std::vector<StreamId> streams() const;  // 0, 1, ... in creation order
  size_t stream_count() const { return streams_.count(); }
  std::string stream_name(StreamId stream) const;
  std::string head_label(StreamId stream) const;        // "" when the stream is empty
  std::string head_description(StreamId stream) const;  // "op #7 'label' on stream 'load'"
  bool step_any();  // steps the lowest-id runnable stream; false if none is runnable
  void drain();     // runs everything (round-robin); KV_ASSERT on deadlock

  // Fault hook (the simulator's delayed event queries): the next `n` query_event calls answer
  // "not yet" whatever the event's state, as a driver whose poll comes too early would see.
  // 0 disarms. Deterministic; one comparison when unarmed.
  void delay_event_queries(int64_t n) { delayed_queries_ = n; }

  size_t device_bytes_reserved() const { return allocator_.device_bytes_reserved(); }
  size_t host_bytes_in_use() const { return allocator_.host_bytes_in_use(); }
  const CachingAllocator& allocator() const { return allocator_; }

 private:
  // Queued ops touching one physical block.
  struct InFlight {
    std::map<uint64_t, uint32_t> by_handout;  // handout id → queued touches
    uint32_t on_home_stream = 0;              // queued touches on the block's allocation stream
    uint32_t poisons_queued = 0;
  };

  void enqueue(CpuOp op, std::initializer_list<Block> blocks);
  void check_ordering(const CpuOp& op);  // stream_ordering, at enqueue (cpu_ordering.h)
  std::vector<CpuOrdering::Range> item_ranges(const KVPoolView& pool, uint64_t indices,
                                              size_t count, int32_t layer_begin,
                                              int32_t layer_end) const;
  Touch resolve(CpuOp& op, const Block& block);
  void track(const Touch& touch, StreamId stream, int delta);
  void poison(PhysicalIndex physical, uint64_t handout_id, StreamId stream);
  void execute(CpuOp& op);
  bool touches_still_valid(const CpuOp& op);
  bool touch_still_valid(const CpuOp& op, const Touch& touch);
  void run_memory_op(const CpuOp& op);
  ByteRegion region(const Touch& touch);
  void run_until(const std::function<bool()>& done, std::string_view what);

  void report(std::string kind, std::string detail);
  std::string describe(const CpuOp& op) const;
  std::string describe_handout(const HandoutRecord& handout) const;

  CpuStreams streams_;
  CachingAllocator allocator_;
  int64_t delayed_queries_ = 0;
  std::vector<InFlight> in_flight_;  // by physical index
  std::vector<BackendViolation> violations_;
  CpuOrdering ordering_;
  // What an upload of a whole small block will have written there (index buffers), by
  // handout id: lets the ordering check see a gather's items at enqueue.
  std::map<uint64_t, std::vector<int64_t>> index_shadow_;
  OpId next_op_id_ = 1;
  CpuBackendObserver* observer_ = nullptr;
};

}  // namespace kvsim
