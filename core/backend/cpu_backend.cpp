// CpuBackend, enqueue side: streams, events, memory and the ops' descriptions.
// Execution, validity checks and scheduling are in cpu_backend_run.cpp.
#include "core/backend/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/common/assert.h"

namespace kvsim {

CpuBackend::CpuBackend(CpuBackendOptions options)
    : allocator_(CachingAllocatorLimits{.device_bytes_max = options.device_bytes_max,
                                        .host_bytes_max = options.host_bytes_max}) {}

CpuBackend::~CpuBackend() = default;

StreamId CpuBackend::create_stream(std::string_view name) {
  return streams_.create(name);
}

EventId CpuBackend::record_event(StreamId stream) {
  const EventId event = streams_.record(stream);
  ordering_.record(stream, event);
  if (observer_ != nullptr) observer_->on_record(stream, event);
  return event;
}

void CpuBackend::wait_event(StreamId stream, EventId event) {
  KV_ASSERT(streams_.known(event), "wait on unknown event " + std::to_string(event.value));
  CpuOp op;
  op.kind = CpuOpKind::kWait;
  op.stream = stream;
  op.label = "wait event " + std::to_string(event.value);
  op.event = event;
  enqueue(std::move(op), {});
  ordering_.wait(stream, event);
}

bool CpuBackend::query_event(EventId event) {
  if (delayed_queries_ > 0) [[unlikely]] {
    --delayed_queries_;
    return false;
  }
  if (!streams_.complete(event)) return false;  // never runs anything
  ordering_.observe_event(event);               // the host now knows it landed
  return true;
}

Block CpuBackend::allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label) {
  KV_ASSERT(streams_.exists(stream), "allocate on unknown stream " + std::to_string(stream));
  const CachingAllocator::Handout h = allocator_.allocate(kind, bytes, stream, label, streams_);
  if (!h.block.valid()) return Block{};
  if (in_flight_.size() <= h.physical) in_flight_.resize(h.physical + 1);
  ordering_.forget(h.physical);
  if (h.reused) poison(h.physical, h.block.id, stream);
  const std::map<uint64_t, uint32_t>& queued = in_flight_[h.physical].by_handout;
  allocator_.forget_handouts_before(h.physical,
                                    queued.empty() ? h.block.id : queued.begin()->first);
  return h.block;
}

// Poisons a block handed out again: now, unless queued work on its allocation stream still
// uses it (that work is ordered before the new owner and must see the old bytes).
void CpuBackend::poison(PhysicalIndex physical, uint64_t handout_id, StreamId stream) {
  const PhysicalBlock& p = allocator_.physical(physical);
  KV_ASSERT(p.home == stream && p.kind == MemoryKind::kDevice, "reuse outside the home pool");
  if (in_flight_[physical].on_home_stream == 0) {
    std::memset(allocator_.data(physical), static_cast<int>(kPoisonByte), p.capacity);
    return;
  }
  CpuOp op;
  op.kind = CpuOpKind::kPoison;
  op.stream = stream;
  op.label = "poison for " + describe_handout(p.handouts.back());
  op.touches.push_back(Touch{.physical = physical, .handout_id = handout_id, .bytes = p.capacity});
  ++in_flight_[physical].poisons_queued;
  enqueue(std::move(op), {});
}

void CpuBackend::record_stream(const Block& block, StreamId stream) {
  KV_ASSERT(streams_.exists(stream), "record_stream on unknown stream " + std::to_string(stream));
  allocator_.record_stream(block, stream);
}

void CpuBackend::free(const Block& block) {
  index_shadow_.erase(block.id);
  allocator_.free(block, streams_);
}

void CpuBackend::copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                            size_t src_offset, size_t bytes, std::string_view label) {
  KV_ASSERT(dst.valid() && src.valid(), "copy_async of a null block");
  CpuOp op;
  op.kind = CpuOpKind::kCopy;
  op.stream = stream;
  op.label = std::string(label);
  op.dst_offset = dst_offset;
  op.src_offset = src_offset;
  op.bytes = bytes;
  enqueue(std::move(op), {dst, src});
}

void CpuBackend::upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                              std::span<const std::byte> host_bytes, std::string_view label) {
  KV_ASSERT(dst.valid(), "upload_async to a null block");
  CpuOp op;
  op.kind = CpuOpKind::kUpload;
  op.stream = stream;
  op.label = std::string(label);
  op.dst_offset = dst_offset;
  op.payload.assign(host_bytes.begin(), host_bytes.end());  // pageable: captured now
  enqueue(std::move(op), {dst});
}

void CpuBackend::transfer_kv_async(StreamId stream, const KVTransfer& transfer) {
  KV_ASSERT(transfer.src.block.valid() && transfer.dst.block.valid(),
            "transfer_kv_async with a null pool block");
  KV_ASSERT(transfer.count == 0 || (transfer.src_indices.valid() && transfer.dst_indices.valid()),
            "transfer_kv_async with a null index block");
  CpuOp op;
  op.kind = CpuOpKind::kTransfer;
  op.stream = stream;
  op.label = transfer.label;
  op.transfer = transfer;
  enqueue(std::move(op),
          {transfer.src.block, transfer.dst.block, transfer.src_indices, transfer.dst_indices});
}

std::vector<std::byte> CpuBackend::read_sync(const Block& block, size_t offset, size_t bytes) {
  synchronize();
  KV_ASSERT(allocator_.is_live(block),
            "read_sync of block " + std::to_string(block.id) + " that is not live");
  const PhysicalIndex physical = *allocator_.physical_of(block.id);
  const size_t live_bytes = allocator_.physical(physical).live_bytes;
  KV_ASSERT(offset <= live_bytes && bytes <= live_bytes - offset, "read_sync out of bounds");
  const std::byte* p = allocator_.data(physical) + offset;
  return std::vector<std::byte>(p, p + bytes);
}

void CpuBackend::enqueue(CpuOp op, std::initializer_list<Block> blocks) {
  KV_ASSERT(streams_.exists(op.stream), "enqueue on unknown stream " + std::to_string(op.stream));
  op.id = next_op_id_++;
  for (const Block& b : blocks)
    op.touches.push_back(resolve(op, b));
  for (const Touch& t : op.touches)
    track(t, op.stream, +1);
  check_ordering(op);
  if (observer_ != nullptr) observer_->on_enqueue(op);
  streams_.push(std::move(op));
}

// The handout `block` names now; a freed one is reported (use_after_free) and left out.
Touch CpuBackend::resolve(CpuOp& op, const Block& block) {
  if (!block.valid()) return Touch{};
  const std::optional<PhysicalIndex> physical = allocator_.physical_of(block.id);
  KV_ASSERT(physical.has_value(), "block " + std::to_string(block.id) + " was never allocated");
  const PhysicalBlock& p = allocator_.physical(*physical);
  if (p.live_id != block.id) {
    const HandoutRecord* next = allocator_.successor(*physical, block.id);
    report("use_after_free", describe(op) + " was enqueued on block " + std::to_string(block.id) +
                                 " after it was freed" +
                                 (next != nullptr ? "; it now belongs to " + describe_handout(*next)
                                                  : std::string()));
    op.skip = true;
    return Touch{};
  }
  KV_ASSERT(block.ptr == p.data.get() && block.bytes == p.live_bytes && block.kind == p.kind,
            "block handle " + std::to_string(block.id) + " does not match its allocation");
  return Touch{.physical = *physical, .handout_id = block.id, .bytes = p.live_bytes};
}

void CpuBackend::track(const Touch& touch, StreamId stream, int delta) {
  if (touch.handout_id == 0) return;
  InFlight& f = in_flight_[touch.physical];
  uint32_t& n = f.by_handout[touch.handout_id];
  KV_ASSERT(delta > 0 || n > 0, "in-flight count underflow");
  n = delta > 0 ? n + 1 : n - 1;
  if (n == 0) f.by_handout.erase(touch.handout_id);
  if (stream == allocator_.physical(touch.physical).home) {
    KV_ASSERT(delta > 0 || f.on_home_stream > 0, "in-flight count underflow");
    f.on_home_stream = delta > 0 ? f.on_home_stream + 1 : f.on_home_stream - 1;
  }
}

void CpuBackend::report(std::string kind, std::string detail) {
  violations_.push_back(BackendViolation{std::move(kind), std::move(detail)});
}

std::string CpuBackend::describe(const CpuOp& op) const {
  return "op #" + std::to_string(op.id) + " '" + op.label + "' on stream '" +
         streams_.name(op.stream) + "'";
}

std::string CpuBackend::describe_handout(const HandoutRecord& h) const {
  return "'" + h.label + "' (alloc #" + std::to_string(h.id) + " on stream '" +
         streams_.name(h.stream) + "')";
}

std::vector<StreamId> CpuBackend::streams() const {
  std::vector<StreamId> ids(streams_.count());
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<StreamId>(i);
  return ids;
}

bool CpuBackend::runnable(StreamId stream) const {
  return streams_.runnable(stream);
}

size_t CpuBackend::pending_ops(StreamId stream) const {
  return streams_.pending(stream);
}

size_t CpuBackend::pending_ops() const {
  return streams_.pending();
}

std::string CpuBackend::stream_name(StreamId stream) const {
  return streams_.name(stream);
}

std::string CpuBackend::head_label(StreamId stream) const {
  const CpuOp* op = streams_.head(stream);
  return op == nullptr ? "" : op->label;
}

std::string CpuBackend::head_description(StreamId stream) const {
  const CpuOp* op = streams_.head(stream);
  return op == nullptr ? "" : describe(*op);
}

}  // namespace kvsim
