// CacheController: moves KV pages between the device pool and the host pool on dedicated
// streams, and reports completions through FIFO ack queues consumed at explicit poll points.
//
// write(): device→host backup. Host slots are allocated at once and the copy is launched at
//   once on the write stream, after an event recorded on the compute stream (so it copies KV
//   produced by forwards enqueued before it).
// load():  host→device load-back. Device slots are allocated at once; the copy is only queued.
//   start_loading() issues every queued load as one merged, layer-by-layer copy on the load
//   stream, recording one event per layer so a forward can wait for layer i alone
//   (LayerDoneCounter), and returns the producer index the forward consumes.
// Acks are appended in issue order and popped only while the oldest one has completed
//   (poll_write_acks / poll_load_acks) — the scheduler applies tree changes there and only
//   there.
//
// Invariants:
//  1. every index buffer a copy reads is recorded on the copy's stream before it is dropped
//     (seed 000), so the caching allocator cannot hand it out while the copy is pending;
//  2. move_indices never mutates its inputs: it returns new device-resident objects (seed 001);
//  3. source and destination slots of a pending op stay allocated until its ack is consumed
//     (the caller holds a lock or host protection on the nodes; pending_ops() lists them);
//  4. side-pool transfers (PoolTransfer) obey 1 and 2 exactly like the main KV indices: each
//     is resolved into new objects and each resolved buffer is recorded on the copy stream;
//  5. [load.layer_events] a started load records one event per layer, in layer order, after
//     every transfer of that layer in every pool (main and side pools): a forward that waits
//     for layer i alone must find all of layer i landed (KV_ASSERT in start_loading);
//  6. [transfers.index_buffers_returned] every index buffer move_indices uploads is given back
//     by release_after: live_index_buffers() is 0 between calls (HiCache::sanity_check);
//  7. [backend.memory_owned] the backend's memory is conserved (memory_problem): its counters
//     add up, every pool block is live, and the index buffers it still holds are exactly the
//     live_index_buffers() counted here — a buffer counted as released but never freed leaks.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"
#include "core/pools/index_vector.h"
#include "core/pools/paged_allocator.h"
#include "core/tiers/pool_transfer.h"

namespace kvsim {

// Host slots a load reads, per pool (kKv: the main KV pool), for the load anchored at `node`.
struct LoadSource {
  NodeId node = 0;
  PoolName pool = PoolName::kKv;
  IndexVector host{Tier::kHost, {}};
};

// A completed (or pending) transfer as the scheduler sees it at a poll point.
struct TransferAck {
  OpId id = 0;
  std::vector<NodeId> node_ids;
  int64_t tokens = 0;
  EventId finish;
  std::vector<LoadSource> sources;  // a load's host sources (empty for a write)
};

// Index vectors resolved for a kernel: new device-resident copies of both sides.
struct ResolvedIndices {
  IndexVector src;
  IndexVector dst;
};

// Rotating per-layer events of in-flight load-backs (SGLang's LayerDoneCounter).
class LayerDoneCounter {
 public:
  static constexpr int kSlots = 3;  // loads that may overlap with forwards
  explicit LayerDoneCounter(int32_t layer_count) : layer_count_(layer_count) {}
  int32_t layer_count() const { return layer_count_; }
  // Claims the next slot for a new load; the caller records its events into it.
  int update_producer(Backend& backend);
  void set_layer_event(int producer, int32_t layer, EventId event);
  void set_consumer(int producer) { consumer_ = producer; }
  // Makes `stream` wait until layer `layer` of the consumed load has landed.
  void wait_until(Backend& backend, StreamId stream, int32_t layer) const;
  // Invariant load.layer_events of `producer`'s load: every layer has an event and the events
  // increase with the layer (a wait for layer i also covers layers < i). "" when it holds.
  std::string check(int producer) const;

 private:
  int32_t layer_count_;
  int producer_ = -1;
  int consumer_ = -1;
  std::array<std::vector<EventId>, kSlots> events_;
};

// A side-pool transfer ready for a kernel: the copy direction's src/dst index objects.
struct ResolvedPoolTransfer {
  PoolName pool = PoolName::kSwa;
  bool to_host = false;
  ResolvedIndices indices;
};

struct CacheControllerOptions {
  int32_t page_size = 1;
};

class CacheController {
 public:
  CacheController(Backend& backend, DeviceKVPool& device_pool, PagedSlotAllocator& device_slots,
                  HostKVPool& host_pool, PagedSlotAllocator& host_slots,
                  CacheControllerOptions options);

  // Registers a side pool (SWA, Mamba state, ...) that operations may carry transfers for.
  void add_side_pool(PoolName name, DeviceKVPool& device_pool, HostKVPool& host_pool);
  bool has_side_pool(PoolName name) const;

  // Device→host backup of `device_indices` for `node`, plus `extra` side-pool transfers whose
  // slots the caller allocated; returns the new host slots, or nullopt when the host pool is
  // full (nothing launched).
  std::optional<IndexVector> write(const IndexVector& device_indices, NodeId node,
                                   const std::vector<PoolTransfer>& extra = {});
  // Queues a host→device load for `node` (and its side-pool transfers); returns the new device
  // slots, or nullopt when the device pool is full (nothing queued).
  std::optional<IndexVector> load(const IndexVector& host_indices, NodeId node,
                                  const std::vector<PoolTransfer>& extra = {});
  // Issues all queued loads as one copy; returns the producer index, or -1 if none queued.
  int start_loading();
  // The producer of the latest load start_loading issued since the last call (-1: none), for
  // the check that a batch's forward waits on it (invariant load.handout).
  int take_latest_issued() { return std::exchange(latest_issued_, -1); }

  // Pops the leading completed acks of each queue (FIFO).
  std::vector<TransferAck> poll_write_acks();
  std::vector<TransferAck> poll_load_acks();

  // New device-resident copies of `src` and `dst` for a kernel on `stream`; the uploads are
  // enqueued on the compute stream. The caller records both on `stream` and frees them.
  ResolvedIndices move_indices(const IndexVector& src, const IndexVector& dst);
  void release_after(const ResolvedIndices& indices, StreamId stream);
  // Resolves side-pool transfers into new device-resident index objects (uploads on the
  // compute stream, so call it before recording the event the copy stream waits on), then
  // enqueues their copies on `stream` (all layers) and releases every buffer after its copy
  // (invariants 1, 2, 4).
  std::vector<ResolvedPoolTransfer> resolve_pool_transfers(
      const std::vector<PoolTransfer>& transfers, bool to_host);
  void issue_pool_transfers(StreamId stream, const std::vector<ResolvedPoolTransfer>& resolved,
                            const std::string& label);

  // Index buffers uploaded by move_indices and not yet given back by release_after.
  int64_t live_index_buffers() const { return live_index_buffers_; }
  // The allocation labels of those buffers: the backend's census names them by these.
  static constexpr std::string_view kSrcIndicesLabel = "src indices";
  static constexpr std::string_view kDstIndicesLabel = "dst indices";
  // [backend.memory_owned] Conservation of the backend's memory (Backend::memory_census):
  //  - the backend's own counters add up (live + pending frees + cached = reserved);
  //  - every pool block this controller names (device and host, main and side pools) is live
  //    in the backend with its pool's size, and no two owners name the same block;
  //  - the live blocks labelled as index buffers are device blocks, as many src as dst, and
  //    exactly live_index_buffers() of them: more means release_after counted a buffer as
  //    given back that the backend still holds (a leak), fewer that one was freed uncounted.
  //    A freed buffer whose free waits for its copy's stream (record_stream) is no longer live.
  // Live blocks labelled otherwise belong to the caller (a simulator's scratch buffer, a sparse
  // index buffer) and are not judged by the first form. The second form names them in
  // `outside` and makes the account complete: every live block must then be a pool's, an index
  // buffer or one of `outside`, else it is reported as owned by no one. "" when it holds.
  // Read only; O(blocks). For the full sanity checks (HiCache::sanity_check).
  std::string memory_problem() const;
  std::string memory_problem(std::span<const Block> outside) const;
  size_t pending_writes() const { return write_acks_.size(); }
  size_t pending_loads() const { return load_acks_.size() + load_queue_.size(); }
  // Makes `stream` wait for every issued load anchored at `node` (its ack not yet consumed).
  // A load of `node` that is still queued (not issued) is a caller error: nothing could order
  // a read after it.
  void wait_for_loads_of(NodeId node, StreamId stream);
  size_t queued_loads() const { return load_queue_.size(); }
  // The host slots of every load from its queueing to its ack (queued, then issued): the copy
  // may read them until the ack, so the cache must keep them allocated and unevictable
  // (invariant inflight.load_sources).
  std::vector<LoadSource> load_sources() const;
  bool load_queued(NodeId node) const;
  StreamId write_stream() const { return write_stream_; }
  StreamId load_stream() const { return load_stream_; }
  LayerDoneCounter& layer_done_counter() { return layer_done_; }
  Backend& backend() { return backend_; }
  PagedSlotAllocator& device_slots() { return device_slots_; }
  PagedSlotAllocator& host_slots() { return host_slots_; }
  DeviceKVPool& device_pool() { return device_pool_; }
  HostKVPool& host_pool() { return host_pool_; }

 private:
  struct QueuedLoad {
    OpId id;
    IndexVector host_indices;
    IndexVector device_indices;
    NodeId node;
    std::vector<PoolTransfer> extra;
  };
  struct SidePoolViews {
    DeviceKVPool* device = nullptr;
    HostKVPool* host = nullptr;
  };
  Block upload_indices(const IndexVector& indices, const std::string& label);
  std::vector<TransferAck> pop_completed(std::deque<TransferAck>& queue);

  // Result checks (read only; mutate.py leaves check_* bodies alone).
  // What the queued loads hold, taken before start_loading merges them.
  struct QueueSummary {
    OpId first_id = 0;
    std::vector<NodeId> nodes;
    std::array<int64_t, kPoolNamesMax> tokens{};  // host slots per pool (kKv: the main pool)
  };
  QueueSummary check_queue_summary() const;
  void check_started(const QueueSummary& queued, const IndexVector& host, const IndexVector& device,
                     const std::vector<PoolTransfer>& extra) const;
  static void check_resolved(const std::vector<PoolTransfer>& transfers, bool to_host,
                             const std::vector<ResolvedPoolTransfer>& resolved);
  static void check_polled(const std::vector<TransferAck>& done,
                           const std::deque<TransferAck>& rest);
  std::string check_memory(const std::span<const Block>* outside) const;

  Backend& backend_;
  DeviceKVPool& device_pool_;
  PagedSlotAllocator& device_slots_;
  HostKVPool& host_pool_;
  PagedSlotAllocator& host_slots_;
  CacheControllerOptions options_;
  int latest_issued_ = -1;
  StreamId write_stream_;
  StreamId load_stream_;
  LayerDoneCounter layer_done_;
  std::array<SidePoolViews, kPoolNamesMax> side_pools_{};
  std::vector<QueuedLoad> load_queue_;
  std::deque<TransferAck> write_acks_;
  std::deque<TransferAck> load_acks_;
  OpId next_op_id_ = 1;
  int64_t live_index_buffers_ = 0;
};

}  // namespace kvsim
