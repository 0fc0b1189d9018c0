// CudaStreams: the CUDA backend's streams (StreamId -> cudaStream_t) and the events it hands
// out (EventId -> cudaEvent_t).
//
// Stream 0 is the compute stream: a created non-blocking stream, or the caller's stream when
// one is given (not destroyed here). Every other stream is created non-blocking, so no stream
// synchronizes implicitly with the legacy default stream.
//
// An EventId stays valid forever; its cudaEvent_t does not. Once an event is seen complete
// (query, synchronize, or a sweep when many are outstanding) the id is marked complete and the
// cudaEvent_t goes back to the pool; waiting on a completed id is then a no-op. So the
// number of live cudaEvents is bounded by the events not yet seen complete, however many the
// core records.
//
// Invariants:
//  1. ids are dense (1, 2, ...), never reused; a complete id never becomes incomplete;
//  2. every live (non-null) entry of events_ was acquired from the pool and recorded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_event_pool.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace kvsim {

class CudaStreams {
 public:
  // `external_compute`: use this stream as stream 0 instead of creating one (may be null).
  CudaStreams(CudaEventPool& pool, CUstream_st* external_compute);
  ~CudaStreams();
  CudaStreams(const CudaStreams&) = delete;
  CudaStreams& operator=(const CudaStreams&) = delete;

  StreamId create(std::string_view name);
  bool exists(StreamId stream) const { return stream < streams_.size(); }
  size_t count() const { return streams_.size(); }
  CUstream_st* get(StreamId stream) const;
  const std::string& name(StreamId stream) const;

  EventId record(StreamId stream);
  void wait(StreamId stream, EventId event);
  bool query(EventId event);
  void synchronize(EventId event);
  void synchronize_stream(StreamId stream);
  void synchronize_all();  // every stream; afterwards every event is complete

  size_t live_events() const { return live_.size(); }

 private:
  struct Stream {
    CUstream_st* handle = nullptr;
    std::string name;
    bool owned = true;
  };

  CUevent_st* live_event(EventId event) const;  // nullptr once complete
  void retire(EventId event);
  void sweep();

  CudaEventPool& pool_;
  std::vector<Stream> streams_;
  std::vector<CUevent_st*> events_;  // by id - 1; nullptr once the event is known complete
  std::vector<uint64_t> live_;       // ids that may still be live (stale ids pruned by sweep)
  size_t sweep_at_ = 1024;
};

}  // namespace kvsim
