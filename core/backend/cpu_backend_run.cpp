// CpuBackend, execution side: stepping streams, checking that an op's blocks are still the
// handouts it was enqueued with, running the byte movers, and the blocking calls' scheduler.
#include <cstring>
#include <utility>

#include "core/backend/cpu_backend.h"
#include "core/backend/cpu_kernels.h"
#include "core/common/assert.h"

namespace kvsim {

bool CpuBackend::step(StreamId stream) {
  if (!streams_.runnable(stream)) return false;
  CpuOp op = streams_.pop(stream);
  execute(op);
  if (observer_ != nullptr) observer_->on_run(op);
  for (const Touch& t : op.touches)
    track(t, op.stream, -1);
  return true;
}

bool CpuBackend::step_any() {
  for (StreamId s = 0; s < streams_.count(); ++s) {
    if (step(s)) return true;
  }
  return false;
}

void CpuBackend::execute(CpuOp& op) {
  if (op.kind == CpuOpKind::kWait) return;
  if (op.kind == CpuOpKind::kPoison) {
    const Touch& t = op.touches[touch_role::kPoisonDst];
    KV_ASSERT(in_flight_[t.physical].poisons_queued > 0, "poison count underflow");
    --in_flight_[t.physical].poisons_queued;
  }
  if (op.skip || !touches_still_valid(op)) return;
  run_memory_op(op);
}

bool CpuBackend::touches_still_valid(const CpuOp& op) {
  bool ok = true;
  for (size_t i = 0; i < op.touches.size(); ++i) {
    const Touch& t = op.touches[i];
    if (t.handout_id == 0) continue;
    bool seen = false;  // one verdict per block, even when it plays two roles
    for (size_t j = 0; j < i; ++j)
      seen = seen || op.touches[j].handout_id == t.handout_id;
    if (!seen && !touch_still_valid(op, t)) ok = false;
  }
  return ok;
}

// Whether `op` may still touch `t`'s memory; reports why not.
bool CpuBackend::touch_still_valid(const CpuOp& op, const Touch& t) {
  const PhysicalBlock& p = allocator_.physical(t.physical);
  const std::string block = "block " + std::to_string(t.handout_id);
  if (p.live_id == t.handout_id) {
    // A block handed out again is ready for its new owner only once its allocation stream
    // has run what the previous owner left queued there (the poison marks that point).
    if (op.stream == p.home || in_flight_[t.physical].poisons_queued == 0) return true;
    report("reuse_while_in_flight",
           describe(op) + " used " + block + ", handed to " + describe_handout(p.handouts.back()) +
               ", before its allocation stream '" + streams_.name(p.home) +
               "' ran the previous owner's queued work (missing wait on that stream)");
    return false;
  }
  if (p.latest_id == t.handout_id) {                       // freed and not handed out again
    if (p.state != PhysicalState::kReleased) return true;  // still cached memory: harmless
    report("use_after_free", describe(op) + " touched " + block + " after it was released");
    return false;
  }
  // Handed out again. Work queued on the allocation stream before the free is ordered before
  // any reuse (the stream runs in order); anywhere else it races the new owner.
  if (op.stream == p.home) return true;
  const HandoutRecord* next = allocator_.successor(t.physical, t.handout_id);
  report("reuse_while_in_flight",
         describe(op) + " touched " + block + " after it was freed and handed to " +
             (next != nullptr ? describe_handout(*next) : std::string("a later allocation")) +
             " (no record_stream kept it alive for stream '" + streams_.name(op.stream) + "')");
  return false;
}

ByteRegion CpuBackend::region(const Touch& t) {
  if (t.handout_id == 0) return ByteRegion{};
  return ByteRegion{.data = allocator_.data(t.physical), .bytes = t.bytes};
}

void CpuBackend::run_memory_op(const CpuOp& op) {
  std::string problem;
  switch (op.kind) {
    case CpuOpKind::kCopy:
      problem = copy_bytes(region(op.touches[touch_role::kCopyDst]), op.dst_offset,
                           region(op.touches[touch_role::kCopySrc]), op.src_offset, op.bytes);
      break;
    case CpuOpKind::kUpload:
      problem = upload_bytes(region(op.touches[touch_role::kUploadDst]), op.dst_offset, op.payload);
      break;
    case CpuOpKind::kTransfer:
      problem = transfer_kv(
          op.transfer,
          KVTransferRegions{.src_pool = region(op.touches[touch_role::kTransferSrcPool]),
                            .dst_pool = region(op.touches[touch_role::kTransferDstPool]),
                            .src_indices = region(op.touches[touch_role::kTransferSrcIndices]),
                            .dst_indices = region(op.touches[touch_role::kTransferDstIndices])});
      break;
    case CpuOpKind::kPoison: {
      const Touch& t = op.touches[touch_role::kPoisonDst];
      std::memset(allocator_.data(t.physical), static_cast<int>(kPoisonByte), t.bytes);
      break;
    }
    case CpuOpKind::kWait:
      break;
  }
  if (!problem.empty()) report("illegal_address", describe(op) + ": " + problem);
}

void CpuBackend::run_until(const std::function<bool()>& done, std::string_view what) {
  while (!done()) {
    bool progressed = false;
    for (StreamId s = 0; s < streams_.count() && !done(); ++s)
      progressed = step(s) || progressed;
    if (progressed) continue;
    std::string why;
    for (StreamId s = 0; s < streams_.count(); ++s) {
      const std::string r = streams_.blocked_reason(s);
      if (!r.empty()) why += (why.empty() ? "" : "; ") + r;
    }
    KV_ASSERT(progressed, "deadlock in " + std::string(what) + ": " + why);
  }
}

void CpuBackend::synchronize_event(EventId event) {
  KV_ASSERT(streams_.known(event), "synchronize on unknown event " + std::to_string(event.value));
  run_until([&] { return streams_.complete(event); },
            "synchronize_event(" + std::to_string(event.value) + ")");
  ordering_.observe_event(event);
}

void CpuBackend::synchronize_stream(StreamId stream) {
  const uint64_t target = streams_.enqueued(stream);
  run_until([&] { return streams_.executed(stream) >= target; },
            "synchronize_stream('" + streams_.name(stream) + "')");
  ordering_.observe_stream(stream);
}

void CpuBackend::synchronize() {
  run_until([&] { return streams_.pending() == 0; }, "synchronize");
  ordering_.observe_all();
}

void CpuBackend::drain() {
  run_until([&] { return streams_.pending() == 0; }, "drain");
  ordering_.observe_all();
}

}  // namespace kvsim
