#include "core/backend/cuda/cuda_caching_allocator.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/backend/cuda/cuda_check.h"

namespace kvsim {
namespace {

size_t round_up(size_t bytes) {
  const size_t b = bytes == 0 ? 1 : bytes;
  KV_ASSERT(b <= SIZE_MAX - CudaCachingAllocator::kRoundBytes, "allocation size overflows");
  return (b + CudaCachingAllocator::kRoundBytes - 1) / CudaCachingAllocator::kRoundBytes *
         CudaCachingAllocator::kRoundBytes;
}

}  // namespace

CudaCachingAllocator::CudaCachingAllocator(CudaStreams& streams, CudaEventPool& events,
                                           CudaAllocatorLimits limits)
    : streams_(streams), events_(events), limits_(limits) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  // Errors are ignored here: at process exit the CUDA runtime may already be unloading.
  for (Physical& p : blocks_) {
    if (p.state == State::kReleased) continue;
    (void)(p.kind == MemoryKind::kDevice ? cudaFree(p.ptr) : cudaFreeHost(p.ptr));
    p.state = State::kReleased;
  }
  for (auto& [stream, queue] : pending_) {
    for (const PendingFree& f : queue)
      events_.release(f.event);
  }
}

Block CudaCachingAllocator::allocate(MemoryKind kind, size_t bytes, StreamId stream,
                                     std::string_view label) {
  KV_ASSERT(streams_.exists(stream), "allocate on unknown stream " + std::to_string(stream));
  const size_t rounded = round_up(bytes);
  process_events();  // as PyTorch's malloc: first return blocks whose events passed
  uint32_t index = 0;
  const bool cached = kind == MemoryKind::kDevice && take_cached(stream, rounded, &index);
  if (!cached && !create(kind, rounded, stream, &index)) return Block{};

  Physical& p = blocks_[index];
  KV_ASSERT(p.state == State::kLive && p.live_id == 0, "handout of a block that is not free");
  KV_ASSERT(p.capacity >= rounded && p.home == stream, "handout from the wrong pool");
  const uint64_t id = next_id_++;
  p.live_id = id;
  p.live_bytes = bytes;
  p.stream_uses.clear();
  p.label.assign(label);
  live_.emplace(id, index);
  return Block{.id = id, .ptr = p.ptr, .bytes = bytes, .kind = kind};
}

bool CudaCachingAllocator::take_cached(StreamId stream, size_t rounded, uint32_t* index) {
  auto it = pool_.lower_bound({stream, rounded, 0});
  if (it == pool_.end() || std::get<0>(*it) != stream) return false;
  if (std::get<1>(*it) / 2 > rounded) return false;  // more than twice the request: too wasteful
  *index = std::get<2>(*it);
  pool_.erase(it);
  Physical& p = blocks_[*index];
  KV_ASSERT(p.state == State::kCached && p.kind == MemoryKind::kDevice, "pool entry not cached");
  p.state = State::kLive;
  return true;
}

bool CudaCachingAllocator::fits(MemoryKind kind, size_t rounded) const {
  const size_t used = kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_;
  const size_t limit =
      kind == MemoryKind::kDevice ? limits_.device_bytes_max : limits_.host_bytes_max;
  return limit == 0 || (rounded <= limit && used <= limit - rounded);
}

bool CudaCachingAllocator::create(MemoryKind kind, size_t rounded, StreamId stream,
                                  uint32_t* index) {
  if (kind == MemoryKind::kDevice && !fits(kind, rounded)) release_cached();
  if (!fits(kind, rounded)) return false;
  std::byte* ptr = raw_allocate(kind, rounded);
  if (ptr == nullptr && kind == MemoryKind::kDevice && release_cached() > 0) {
    ptr = raw_allocate(kind, rounded);
  }
  if (ptr == nullptr) return false;

  if (unused_slots_.empty()) {
    KV_ASSERT(blocks_.size() < UINT32_MAX, "too many physical blocks");
    blocks_.emplace_back();
    unused_slots_.push_back(static_cast<uint32_t>(blocks_.size() - 1));
  }
  *index = unused_slots_.back();
  unused_slots_.pop_back();
  Physical& p = blocks_[*index];
  KV_ASSERT(p.state == State::kReleased, "recycled slot still holds a block");
  p = Physical{
      .ptr = ptr, .capacity = rounded, .kind = kind, .home = stream, .state = State::kLive};
  (kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_) += rounded;
  return true;
}

// cudaMalloc / cudaHostAlloc; nullptr when out of memory (the error is cleared).
std::byte* CudaCachingAllocator::raw_allocate(MemoryKind kind, size_t rounded) {
  void* ptr = nullptr;
  const cudaError_t status =
      kind == MemoryKind::kDevice
          ? cudaMalloc(&ptr, rounded)
          : cudaHostAlloc(&ptr, rounded, cudaHostAllocPortable | cudaHostAllocMapped);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky, but leave no error behind for the next check
    return nullptr;
  }
  KV_CUDA_CHECK(status);
  KV_ASSERT(ptr != nullptr, "allocation returned null");
  return static_cast<std::byte*>(ptr);
}

void CudaCachingAllocator::raw_release(Physical& p) {
  KV_ASSERT(p.state != State::kReleased && p.ptr != nullptr, "release of a released block");
  if (p.kind == MemoryKind::kDevice) {
    KV_CUDA_CHECK(cudaFree(p.ptr));
    device_bytes_ -= p.capacity;
  } else {
    KV_CUDA_CHECK(cudaFreeHost(p.ptr));
    host_bytes_ -= p.capacity;
  }
  p.ptr = nullptr;
  p.state = State::kReleased;
}

size_t CudaCachingAllocator::release_cached() {
  if (pool_.empty()) return 0;
  // Cached blocks may still be used by work queued on their home stream before the free.
  KV_CUDA_CHECK(cudaDeviceSynchronize());
  size_t released = 0;
  for (const auto& [stream, capacity, index] : pool_) {
    KV_ASSERT(blocks_[index].state == State::kCached, "pool entry not cached");
    raw_release(blocks_[index]);
    unused_slots_.push_back(index);
    released += capacity;
  }
  pool_.clear();
  return released;
}

CudaCachingAllocator::Physical& CudaCachingAllocator::live_block(const Block& block,
                                                                 const char* what) {
  auto it = live_.find(block.id);
  KV_ASSERT(it != live_.end(), std::string(what) + " of block " + std::to_string(block.id) +
                                   " that is not live (null, freed or forged)");
  Physical& p = blocks_[it->second];
  KV_ASSERT(p.live_id == block.id && p.ptr == block.ptr && p.live_bytes == block.bytes &&
                p.kind == block.kind,
            std::string(what) + ": block handle " + std::to_string(block.id) +
                " does not match its allocation");
  return p;
}

bool CudaCachingAllocator::is_live(const Block& block) const {
  auto it = live_.find(block.id);
  return it != live_.end() && blocks_[it->second].ptr == block.ptr;
}

void CudaCachingAllocator::check_range(const Block& block, size_t offset, size_t bytes,
                                       const char* what) const {
  auto it = live_.find(block.id);
  KV_ASSERT(it != live_.end(), std::string(what) + " uses block " + std::to_string(block.id) +
                                   " that is not live (null, freed or forged)");
  const Physical& p = blocks_[it->second];
  KV_ASSERT(p.ptr == block.ptr && p.live_bytes == block.bytes,
            std::string(what) + ": block handle does not match its allocation");
  KV_ASSERT(offset <= block.bytes && bytes <= block.bytes - offset,
            std::string(what) + ": [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                ") is outside a " + std::to_string(block.bytes) + "-byte block");
}

void CudaCachingAllocator::record_stream(const Block& block, StreamId stream) {
  KV_ASSERT(streams_.exists(stream), "record_stream on unknown stream " + std::to_string(stream));
  Physical& p = live_block(block, "record_stream");
  if (stream != p.home) p.stream_uses.insert(stream);
}

void CudaCachingAllocator::free(const Block& block) {
  Physical& p = live_block(block, "free");
  const uint32_t index = live_.at(block.id);
  live_.erase(block.id);
  p.live_id = 0;
  p.live_bytes = 0;
  std::set<StreamId> uses = std::move(p.stream_uses);
  p.stream_uses.clear();
  if (p.kind == MemoryKind::kPinnedHost) uses.insert(p.home);  // host memory: wait for all
  p.state = State::kPending;
  p.events_pending = 0;
  for (StreamId s : uses) {
    CUevent_st* event = events_.acquire();
    KV_CUDA_CHECK(cudaEventRecord(event, streams_.get(s)));  // the free point on s
    pending_[s].push_back(PendingFree{.event = event, .index = index});
    ++p.events_pending;
  }
  if (p.events_pending == 0) finish_free(index);
}

void CudaCachingAllocator::finish_free(uint32_t index) {
  Physical& p = blocks_[index];
  KV_ASSERT(p.state == State::kPending && p.events_pending == 0, "finish of a busy block");
  if (p.kind == MemoryKind::kPinnedHost) {
    raw_release(p);
    unused_slots_.push_back(index);
    return;
  }
  p.state = State::kCached;
  const bool inserted = pool_.emplace(p.home, p.capacity, index).second;
  KV_ASSERT(inserted, "block cached twice");
}

void CudaCachingAllocator::process_events() {
  for (auto& [stream, queue] : pending_) {
    while (!queue.empty()) {
      const PendingFree f = queue.front();
      const cudaError_t status = cudaEventQuery(f.event);
      if (status == cudaErrorNotReady) break;  // FIFO per stream: later ones are not done
      KV_CUDA_CHECK(status);
      queue.pop_front();
      events_.release(f.event);
      Physical& p = blocks_[f.index];
      KV_ASSERT(p.state == State::kPending && p.events_pending > 0, "event for an idle block");
      if (--p.events_pending == 0) finish_free(f.index);
    }
  }
}

size_t CudaCachingAllocator::pending_frees() const {
  size_t n = 0;
  for (const auto& [stream, queue] : pending_)
    n += queue.size();
  return n;
}

MemoryCensus CudaCachingAllocator::census() const {
  MemoryCensus c;
  c.device_reserved_bytes = device_bytes_;
  c.host_in_use_bytes = host_bytes_;
  auto fail = [&c](const std::string& what) {
    if (c.problem.empty()) c.problem = what;
  };
  std::unordered_map<uint32_t, uint32_t> waits;  // deferred-free queue entries per block
  for (const auto& [stream, queue] : pending_) {
    for (const PendingFree& f : queue)
      ++waits[f.index];
  }
  size_t released = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Physical& p = blocks_[i];
    const bool device = p.kind == MemoryKind::kDevice;
    auto name = [i] { return "physical block " + std::to_string(i); };
    const auto w = waits.find(static_cast<uint32_t>(i));
    const uint32_t queued = w == waits.end() ? 0 : w->second;
    if (p.state != State::kPending && queued != 0) {
      fail(name() + " is not waiting to be freed, yet deferred frees name it");
    }
    if ((p.state == State::kLive) != (p.live_id != 0)) fail(name() + ": live state");
    if ((p.state == State::kReleased) != (p.ptr == nullptr)) fail(name() + ": released");
    switch (p.state) {
      case State::kLive: {
        const auto it = live_.find(p.live_id);
        if (it == live_.end() || it->second != i) fail(name() + ": not in the live map");
        if (p.live_bytes > p.capacity) fail(name() + ": live handout larger than the block");
        c.add_live(
            LiveBlock{
                .block =
                    Block{.id = p.live_id, .ptr = p.ptr, .bytes = p.live_bytes, .kind = p.kind},
                .label = p.label},
            p.capacity);
        break;
      }
      case State::kPending:
        c.add_pending(p.kind, p.capacity);
        if (p.events_pending == 0 || queued != p.events_pending) {
          fail(name() + " waits for " + std::to_string(p.events_pending) +
               " event(s) but the deferred-free queues hold " + std::to_string(queued));
        }
        break;
      case State::kCached:
        if (!device) fail(name() + ": a cached pinned host block");
        if (pool_.count({p.home, p.capacity, static_cast<uint32_t>(i)}) != 1) {
          fail(name() + ": cached but not in its pool");
        }
        c.add_cached(p.capacity);
        break;
      case State::kReleased:
        ++released;
        break;
    }
  }
  if (c.live.size() != live_.size()) fail("live handouts != the live map's entries");
  if (released != unused_slots_.size()) fail("released blocks != recyclable slots");
  c.finish(pool_.size());
  return c;
}

}  // namespace kvsim
