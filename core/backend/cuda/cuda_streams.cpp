#include "core/backend/cuda/cuda_streams.h"

#include <algorithm>

#include "core/backend/cuda/cuda_check.h"

namespace kvsim {

CudaStreams::CudaStreams(CudaEventPool& pool, CUstream_st* external_compute) : pool_(pool) {
  if (external_compute != nullptr) {
    streams_.push_back(Stream{.handle = external_compute, .name = "compute", .owned = false});
  } else {
    create("compute");
  }
  KV_ASSERT(streams_.size() == 1, "stream 0 must be the compute stream");
}

CudaStreams::~CudaStreams() {
  for (const Stream& s : streams_) {
    (void)cudaStreamSynchronize(s.handle);
    if (s.owned) (void)cudaStreamDestroy(s.handle);
  }
}

StreamId CudaStreams::create(std::string_view name) {
  KV_ASSERT(streams_.size() < UINT32_MAX, "too many streams");
  cudaStream_t handle = nullptr;
  KV_CUDA_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
  KV_ASSERT(handle != nullptr, "cudaStreamCreateWithFlags returned the legacy stream");
  streams_.push_back(Stream{.handle = handle, .name = std::string(name), .owned = true});
  return static_cast<StreamId>(streams_.size() - 1);
}

CUstream_st* CudaStreams::get(StreamId stream) const {
  KV_ASSERT(exists(stream), "unknown stream " + std::to_string(stream));
  return streams_[stream].handle;
}

const std::string& CudaStreams::name(StreamId stream) const {
  KV_ASSERT(exists(stream), "unknown stream " + std::to_string(stream));
  return streams_[stream].name;
}

EventId CudaStreams::record(StreamId stream) {
  cudaStream_t handle = get(stream);
  if (live_.size() >= sweep_at_) sweep();
  cudaEvent_t event = pool_.acquire();
  KV_CUDA_CHECK(cudaEventRecord(event, handle));
  events_.push_back(event);
  const EventId id{.value = events_.size()};
  live_.push_back(id.value);
  return id;
}

CUevent_st* CudaStreams::live_event(EventId event) const {
  KV_ASSERT(event.valid() && event.value <= events_.size(),
            "unknown event " + std::to_string(event.value));
  return events_[event.value - 1];
}

void CudaStreams::wait(StreamId stream, EventId event) {
  cudaStream_t handle = get(stream);
  cudaEvent_t e = live_event(event);
  if (e == nullptr) return;  // already complete: nothing to wait for
  KV_CUDA_CHECK(cudaStreamWaitEvent(handle, e, 0));
}

bool CudaStreams::query(EventId event) {
  cudaEvent_t e = live_event(event);
  if (e == nullptr) return true;
  const cudaError_t status = cudaEventQuery(e);
  if (status == cudaErrorNotReady) return false;
  KV_CUDA_CHECK(status);
  retire(event);
  return true;
}

void CudaStreams::synchronize(EventId event) {
  cudaEvent_t e = live_event(event);
  if (e == nullptr) return;
  KV_CUDA_CHECK(cudaEventSynchronize(e));
  retire(event);
}

void CudaStreams::synchronize_stream(StreamId stream) {
  KV_CUDA_CHECK(cudaStreamSynchronize(get(stream)));
}

void CudaStreams::synchronize_all() {
  for (const Stream& s : streams_)
    KV_CUDA_CHECK(cudaStreamSynchronize(s.handle));
  // Every event was recorded on one of these streams, so every one is complete now.
  for (uint64_t id : live_) {
    if (events_[id - 1] != nullptr) retire(EventId{.value = id});
  }
  live_.clear();
}

void CudaStreams::retire(EventId event) {
  cudaEvent_t& slot = events_[event.value - 1];
  KV_ASSERT(slot != nullptr, "event retired twice");
  pool_.release(slot);
  slot = nullptr;
}

// Queries every possibly-live event, retires the complete ones and forgets stale ids. The
// next sweep waits until live_ has doubled, so sweeping costs O(1) amortised per record.
void CudaStreams::sweep() {
  std::erase_if(live_, [&](uint64_t id) {
    if (events_[id - 1] == nullptr) return true;
    return query(EventId{.value = id});
  });
  sweep_at_ = std::max<size_t>(1024, 2 * live_.size());
}

}  // namespace kvsim
