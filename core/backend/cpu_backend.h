// CpuBackend: a deterministic emulation of a GPU's memory, streams, events and copy kernels.
//
// An operation enqueued on a stream runs only when the driver (a test, the simulator) advances
// that stream with step(); nothing runs on its own, so every completion order can be produced
// on purpose and replayed. Blocking calls (synchronize*) advance streams in a fixed order
// (lowest runnable stream id first).
//
// Device memory comes from a caching allocator with PyTorch's rules (see backend.h, rule 3).
// Every handout of a block gets a fresh Block::id; a reused block is filled with poison bytes
// (0xDB) in its stream's order; every
// op remembers the ids of the blocks it touches, and when it runs it checks they are still
// the same handouts. If one was handed to someone else in between, the op does not touch
// memory and a "reuse_while_in_flight" violation names both the op and the new owner — the
// emulated form of the illegal memory access seed 000 caused on real GPUs.
//
// Invariants:
//  1. a stream's ops run in enqueue order, each exactly once;
//  2. an event completes exactly when its stream has run every op enqueued before it;
//  3. no op ever reads or writes outside a live block (violations are reported instead).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend/backend.h"

namespace kvsim {

struct CpuBackendOptions {
  size_t device_bytes_max = 0;  // 0 = unlimited
  size_t host_bytes_max = 0;    // 0 = unlimited
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;

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

  void copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                  size_t src_offset, size_t bytes, std::string_view label) override;
  void upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                    std::span<const std::byte> host_bytes, std::string_view label) override;
  void transfer_kv_async(StreamId stream, const KVTransfer& transfer) override;
  std::vector<std::byte> read_sync(const Block& block, size_t offset, size_t bytes) override;

  const std::vector<BackendViolation>& violations() const override { return violations_; }
  void clear_violations() { violations_.clear(); }

  // --- Driver API ---
  bool step(StreamId stream);  // runs the head op if runnable; false if none or blocked
  bool runnable(StreamId stream) const;
  size_t pending_ops(StreamId stream) const;
  size_t pending_ops() const;
  size_t stream_count() const { return streams_.size(); }
  std::string stream_name(StreamId stream) const;
  std::string head_label(StreamId stream) const;  // "" when the stream is empty
  bool step_any();  // steps the lowest runnable stream; false if none is runnable
  void drain();     // runs everything; KV_ASSERT on deadlock
  size_t device_bytes_reserved() const { return device_bytes_; }

 private:
  enum class OpKind : uint8_t { kCopy, kUpload, kTransfer, kWait, kPoison };
  struct Touch {
    size_t phys;
    uint64_t id;
  };
  struct Op {
    OpId id = 0;
    OpKind kind = OpKind::kCopy;
    std::string label;
    std::vector<Touch> touches;
    bool poisoned = false;  // a violation was found at enqueue: never touch memory
    Block dst, src;
    size_t dst_offset = 0, src_offset = 0, bytes = 0;
    std::vector<std::byte> payload;
    KVTransfer transfer;
    EventId event;
  };
  struct Stream {
    std::string name;
    std::deque<Op> queue;
    uint64_t enqueued = 0;
    uint64_t executed = 0;
  };
  struct Physical {
    std::unique_ptr<std::byte[]> data;
    size_t bytes = 0;
    MemoryKind kind = MemoryKind::kDevice;
    StreamId alloc_stream = 0;
    uint64_t current_id = 0;       // 0: not handed out
    uint64_t last_handout_id = 0;  // the most recent handout, kept after it is freed
    std::string owner;             // label + allocation sequence of the most recent handout
    std::set<StreamId> stream_uses;
  };
  struct DeferredFree {
    size_t phys;
    std::vector<EventId> events;
  };

  Stream& stream_at(StreamId stream);
  void enqueue(StreamId stream, Op op, std::initializer_list<Block> blocks);
  void execute(Stream& stream, Op& op);
  bool still_valid(const Op& op, const Stream& stream);
  void run_transfer(const Op& op, const Stream& stream);
  bool in_bounds(const Block& block, size_t offset, size_t bytes) const;
  void report(std::string kind, std::string detail);
  void process_deferred_frees();
  void return_to_pool(size_t phys);
  std::string describe(const Op& op, const Stream& stream) const;

  CpuBackendOptions options_;
  std::vector<Stream> streams_;
  std::vector<std::pair<StreamId, uint64_t>> events_;  // EventId.value - 1 → (stream, target)
  std::vector<Physical> physical_;
  std::map<uint64_t, size_t> id_to_phys_;
  std::set<std::tuple<StreamId, size_t, size_t>> free_pool_;  // (stream, bytes, phys)
  std::vector<DeferredFree> deferred_;
  std::vector<BackendViolation> violations_;
  uint64_t next_block_id_ = 1;
  OpId next_op_id_ = 1;
  size_t device_bytes_ = 0;
  size_t host_bytes_ = 0;
};

}  // namespace kvsim
