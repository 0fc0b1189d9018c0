#include "core/backend/cpu_backend.h"

#include <cstring>

#include "core/common/assert.h"

namespace kvsim {
namespace {

constexpr size_t kRoundBytes = 512;  // allocation granularity of the caching allocator
constexpr std::byte kPoison{0xDB};   // fills every reused block

size_t round_up(size_t bytes) {
  return (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

}  // namespace

CpuBackend::CpuBackend(CpuBackendOptions options) : options_(options) {
  streams_.emplace_back();
  streams_.back().name = "compute";
}

CpuBackend::~CpuBackend() = default;

CpuBackend::Stream& CpuBackend::stream_at(StreamId stream) {
  KV_ASSERT(stream < streams_.size(), "unknown stream " + std::to_string(stream));
  return streams_[stream];
}

StreamId CpuBackend::create_stream(std::string_view name) {
  streams_.emplace_back();
  streams_.back().name = std::string(name);
  return static_cast<StreamId>(streams_.size() - 1);
}

EventId CpuBackend::record_event(StreamId stream) {
  events_.emplace_back(stream, stream_at(stream).enqueued);
  return EventId{events_.size()};
}

void CpuBackend::wait_event(StreamId stream, EventId event) {
  KV_ASSERT(event.valid() && event.value <= events_.size(), "unknown event");
  Op op;
  op.kind = OpKind::kWait;
  op.label = "wait event " + std::to_string(event.value);
  op.event = event;
  enqueue(stream, std::move(op), {});
}

bool CpuBackend::query_event(EventId event) {
  KV_ASSERT(event.valid() && event.value <= events_.size(), "unknown event");
  const auto& [stream, target] = events_[event.value - 1];
  return streams_[stream].executed >= target;
}

void CpuBackend::synchronize_event(EventId event) {
  while (!query_event(event)) {
    KV_ASSERT(step_any(), "deadlock: event " + std::to_string(event.value) + " can never complete");
  }
}

void CpuBackend::synchronize_stream(StreamId stream) {
  synchronize_event(record_event(stream));
}

void CpuBackend::synchronize() {
  drain();
}

Block CpuBackend::allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label) {
  stream_at(stream);
  const size_t rounded = round_up(bytes == 0 ? 1 : bytes);
  size_t phys = physical_.size();
  if (kind == MemoryKind::kDevice) {
    process_deferred_frees();
    auto it = free_pool_.lower_bound({stream, rounded, 0});
    if (it != free_pool_.end() && std::get<0>(*it) == stream) {
      phys = std::get<2>(*it);
      free_pool_.erase(it);
    }
  }
  if (phys == physical_.size()) {
    size_t& used = kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_;
    const size_t limit =
        kind == MemoryKind::kDevice ? options_.device_bytes_max : options_.host_bytes_max;
    if (limit != 0 && used + rounded > limit) return Block{};
    used += rounded;
    Physical p;
    p.data = std::make_unique<std::byte[]>(rounded);  // value-initialised: zeros
    p.bytes = rounded;
    p.kind = kind;
    p.alloc_stream = stream;
    physical_.push_back(std::move(p));
  }
  Physical& p = physical_[phys];
  const bool reused = p.last_handout_id != 0;
  p.current_id = next_block_id_++;
  p.last_handout_id = p.current_id;
  p.owner = std::string(label) + " (alloc #" + std::to_string(p.current_id) + " on stream " +
            streams_[stream].name + ")";
  p.stream_uses.clear();
  id_to_phys_[p.current_id] = phys;
  const Block block{.id = p.current_id, .ptr = p.data.get(), .bytes = bytes, .kind = kind};
  if (reused) {
    // Poison in stream order: work enqueued earlier on this stream still sees the old bytes,
    // anything that touches the block later — on any stream — sees garbage.
    Op op;
    op.kind = OpKind::kPoison;
    op.label = "poison for " + p.owner;
    op.dst = Block{.id = p.current_id, .ptr = p.data.get(), .bytes = p.bytes, .kind = kind};
    enqueue(stream, std::move(op), {block});
  }
  return block;
}

void CpuBackend::record_stream(const Block& block, StreamId stream) {
  auto it = id_to_phys_.find(block.id);
  KV_ASSERT(it != id_to_phys_.end() && physical_[it->second].current_id == block.id,
            "record_stream on a block that is not live");
  Physical& p = physical_[it->second];
  if (stream != p.alloc_stream) p.stream_uses.insert(stream);
}

void CpuBackend::free(const Block& block) {
  if (!block.valid()) return;
  auto it = id_to_phys_.find(block.id);
  KV_ASSERT(it != id_to_phys_.end() && physical_[it->second].current_id == block.id,
            "free of block " + std::to_string(block.id) + " that is not live (double free)");
  Physical& p = physical_[it->second];
  p.current_id = 0;
  if (p.kind == MemoryKind::kPinnedHost) return;  // pinned memory is not cached
  if (p.stream_uses.empty()) {
    return_to_pool(it->second);
    return;
  }
  // Reusable only once every recorded stream has passed this point (record_stream rule).
  DeferredFree d{it->second, {}};
  for (StreamId s : p.stream_uses)
    d.events.push_back(record_event(s));
  deferred_.push_back(std::move(d));
}

void CpuBackend::return_to_pool(size_t phys) {
  const Physical& p = physical_[phys];
  free_pool_.insert({p.alloc_stream, p.bytes, phys});
}

void CpuBackend::process_deferred_frees() {
  std::vector<DeferredFree> still;
  for (DeferredFree& d : deferred_) {
    bool done = true;
    for (EventId e : d.events)
      done = done && query_event(e);
    if (done) {
      return_to_pool(d.phys);
    } else {
      still.push_back(std::move(d));
    }
  }
  deferred_ = std::move(still);
}

void CpuBackend::report(std::string kind, std::string detail) {
  violations_.push_back(BackendViolation{std::move(kind), std::move(detail)});
}

std::string CpuBackend::describe(const Op& op, const Stream& stream) const {
  return "op #" + std::to_string(op.id) + " '" + op.label + "' on stream " + stream.name;
}

void CpuBackend::enqueue(StreamId stream_id, Op op, std::initializer_list<Block> blocks) {
  Stream& stream = stream_at(stream_id);
  op.id = next_op_id_++;
  for (const Block& b : blocks) {
    if (!b.valid()) continue;
    auto it = id_to_phys_.find(b.id);
    if (it == id_to_phys_.end() || physical_[it->second].current_id != b.id) {
      report("use_after_free", describe(op, stream) + " was enqueued on block " +
                                   std::to_string(b.id) + " after it was freed");
      op.poisoned = true;
      continue;
    }
    op.touches.push_back(Touch{it->second, b.id});
  }
  ++stream.enqueued;
  stream.queue.push_back(std::move(op));
}

bool CpuBackend::still_valid(const Op& op, const Stream& stream) {
  bool ok = !op.poisoned;
  for (const Touch& t : op.touches) {
    const Physical& p = physical_[t.phys];
    if (p.current_id == t.id) continue;
    // Work enqueued on the allocation stream before the free is ordered before any reuse.
    if (p.kind == MemoryKind::kDevice && &stream == &streams_[p.alloc_stream]) continue;
    if (p.last_handout_id != t.id) {  // handed out again since (and maybe freed again)
      report("reuse_while_in_flight", describe(op, stream) + " touched block " +
                                          std::to_string(t.id) + " after it was handed to " +
                                          p.owner);
      ok = false;
    } else if (p.kind == MemoryKind::kPinnedHost) {
      report("use_after_free",
             describe(op, stream) + " touched released host block " + std::to_string(t.id));
      ok = false;
    }
    // A freed, not yet reused device block still holds its bytes: the access is harmless.
  }
  return ok;
}

bool CpuBackend::in_bounds(const Block& block, size_t offset, size_t bytes) const {
  return offset <= block.bytes && bytes <= block.bytes - offset;
}

void CpuBackend::copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                            size_t src_offset, size_t bytes, std::string_view label) {
  Op op;
  op.kind = OpKind::kCopy;
  op.label = std::string(label);
  op.dst = dst;
  op.src = src;
  op.dst_offset = dst_offset;
  op.src_offset = src_offset;
  op.bytes = bytes;
  enqueue(stream, std::move(op), {dst, src});
}

void CpuBackend::upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                              std::span<const std::byte> host_bytes, std::string_view label) {
  Op op;
  op.kind = OpKind::kUpload;
  op.label = std::string(label);
  op.dst = dst;
  op.dst_offset = dst_offset;
  op.bytes = host_bytes.size();
  op.payload.assign(host_bytes.begin(), host_bytes.end());  // pageable: captured now
  enqueue(stream, std::move(op), {dst});
}

void CpuBackend::transfer_kv_async(StreamId stream, const KVTransfer& transfer) {
  Op op;
  op.kind = OpKind::kTransfer;
  op.label = transfer.label;
  op.transfer = transfer;
  enqueue(stream, std::move(op),
          {transfer.src.block, transfer.dst.block, transfer.src_indices, transfer.dst_indices});
}

std::vector<std::byte> CpuBackend::read_sync(const Block& block, size_t offset, size_t bytes) {
  synchronize();
  KV_ASSERT(in_bounds(block, offset, bytes), "read_sync out of bounds");
  auto it = id_to_phys_.find(block.id);
  KV_ASSERT(it != id_to_phys_.end() && physical_[it->second].current_id == block.id,
            "read_sync of a block that is not live");
  const std::byte* p = physical_[it->second].data.get() + offset;
  return std::vector<std::byte>(p, p + bytes);
}

bool CpuBackend::runnable(StreamId stream) const {
  KV_ASSERT(stream < streams_.size(), "unknown stream");
  const Stream& s = streams_[stream];
  if (s.queue.empty()) return false;
  const Op& head = s.queue.front();
  if (head.kind != OpKind::kWait) return true;
  const auto& [other, target] = events_[head.event.value - 1];
  return streams_[other].executed >= target;
}

bool CpuBackend::step(StreamId stream) {
  if (!runnable(stream)) return false;
  Stream& s = streams_[stream];
  Op op = std::move(s.queue.front());
  s.queue.pop_front();
  execute(s, op);
  ++s.executed;
  return true;
}

bool CpuBackend::step_any() {
  for (StreamId s = 0; s < streams_.size(); ++s) {
    if (step(s)) return true;
  }
  return false;
}

void CpuBackend::drain() {
  while (pending_ops() > 0)
    KV_ASSERT(step_any(), "deadlock: pending ops but none runnable");
}

size_t CpuBackend::pending_ops(StreamId stream) const {
  KV_ASSERT(stream < streams_.size(), "unknown stream");
  return streams_[stream].queue.size();
}

size_t CpuBackend::pending_ops() const {
  size_t n = 0;
  for (const Stream& s : streams_)
    n += s.queue.size();
  return n;
}

std::string CpuBackend::stream_name(StreamId stream) const {
  KV_ASSERT(stream < streams_.size(), "unknown stream");
  return streams_[stream].name;
}

std::string CpuBackend::head_label(StreamId stream) const {
  KV_ASSERT(stream < streams_.size(), "unknown stream");
  return streams_[stream].queue.empty() ? "" : streams_[stream].queue.front().label;
}

void CpuBackend::execute(Stream& stream, Op& op) {
  if (op.kind == OpKind::kWait) return;
  if (!still_valid(op, stream)) return;
  switch (op.kind) {
    case OpKind::kCopy:
      if (!in_bounds(op.dst, op.dst_offset, op.bytes) ||
          !in_bounds(op.src, op.src_offset, op.bytes)) {
        report("illegal_address", describe(op, stream) + " copies outside a block");
        return;
      }
      std::memmove(op.dst.ptr + op.dst_offset, op.src.ptr + op.src_offset, op.bytes);
      return;
    case OpKind::kUpload:
      if (!in_bounds(op.dst, op.dst_offset, op.bytes)) {
        report("illegal_address", describe(op, stream) + " uploads outside a block");
        return;
      }
      std::memcpy(op.dst.ptr + op.dst_offset, op.payload.data(), op.bytes);
      return;
    case OpKind::kTransfer:
      run_transfer(op, stream);
      return;
    case OpKind::kPoison:
      std::memset(op.dst.ptr, static_cast<int>(kPoison), op.dst.bytes);
      return;
    case OpKind::kWait:
      return;
  }
}

void CpuBackend::run_transfer(const Op& op, const Stream& stream) {
  const KVTransfer& t = op.transfer;
  const size_t index_bytes = t.count * sizeof(int64_t);
  if (!in_bounds(t.src_indices, 0, index_bytes) || !in_bounds(t.dst_indices, 0, index_bytes) ||
      t.src.item_bytes != t.dst.item_bytes || t.layer_begin < 0 ||
      t.layer_end > t.src.layer_count || t.layer_end > t.dst.layer_count ||
      !in_bounds(t.src.block, 0, t.src.total_bytes()) ||
      !in_bounds(t.dst.block, 0, t.dst.total_bytes())) {
    report("illegal_address", describe(op, stream) + " has a malformed transfer descriptor");
    return;
  }
  std::vector<int64_t> src_idx(t.count);
  std::vector<int64_t> dst_idx(t.count);
  std::memcpy(src_idx.data(), t.src_indices.ptr, index_bytes);
  std::memcpy(dst_idx.data(), t.dst_indices.ptr, index_bytes);
  for (size_t i = 0; i < t.count; ++i) {
    if (src_idx[i] < 0 || src_idx[i] >= t.src.slot_count || dst_idx[i] < 0 ||
        dst_idx[i] >= t.dst.slot_count) {
      report("illegal_address", describe(op, stream) + " index " + std::to_string(i) + " (" +
                                    std::to_string(src_idx[i]) + " -> " +
                                    std::to_string(dst_idx[i]) + ") is outside its pool");
      return;
    }
  }
  for (int32_t layer = t.layer_begin; layer < t.layer_end; ++layer) {
    for (size_t i = 0; i < t.count; ++i) {
      std::memcpy(t.dst.block.ptr + t.dst.offset(layer, dst_idx[i]),
                  t.src.block.ptr + t.src.offset(layer, src_idx[i]), t.src.item_bytes);
    }
  }
}

}  // namespace kvsim
