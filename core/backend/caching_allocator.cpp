#include "core/backend/caching_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/common/assert.h"

namespace kvsim {
namespace {

size_t round_up(size_t bytes) {
  const size_t b = bytes == 0 ? 1 : bytes;
  KV_ASSERT(b <= SIZE_MAX - CachingAllocator::kRoundBytes, "allocation size overflows");
  return (b + CachingAllocator::kRoundBytes - 1) / CachingAllocator::kRoundBytes *
         CachingAllocator::kRoundBytes;
}

}  // namespace

CachingAllocator::Handout CachingAllocator::allocate(MemoryKind kind, size_t bytes, StreamId stream,
                                                     std::string_view label,
                                                     const StreamProgress& progress) {
  const size_t rounded = round_up(bytes);
  std::optional<PhysicalIndex> index;
  if (kind == MemoryKind::kDevice) {
    process_events(progress);  // as PyTorch's malloc: first return blocks whose events passed
    index = take_cached(stream, rounded);
  }
  const bool reused = index.has_value();
  if (!index) index = create(kind, rounded, stream);
  if (!index) return Handout{};

  PhysicalBlock& p = blocks_[*index];
  KV_ASSERT(p.state == PhysicalState::kLive, "handout of a block that is not reserved");
  KV_ASSERT(p.live_id == 0, "handout of a block that is already live");
  physical_of_id_.push_back(*index);
  const uint64_t id = physical_of_id_.size();
  p.live_id = id;
  p.live_bytes = bytes;
  p.latest_id = id;
  p.stream_uses.clear();
  p.handouts.push_back(HandoutRecord{.id = id, .stream = stream, .label = std::string(label)});
  return Handout{
      .block = Block{.id = id, .ptr = p.data.get(), .bytes = bytes, .kind = kind},
      .physical = *index,
      .reused = reused,
  };
}

std::optional<PhysicalIndex> CachingAllocator::take_cached(StreamId stream, size_t rounded) {
  auto it = pool_.lower_bound({stream, rounded, 0});
  if (it == pool_.end() || std::get<0>(*it) != stream) return std::nullopt;
  const PhysicalIndex index = std::get<2>(*it);
  pool_.erase(it);
  PhysicalBlock& p = blocks_[index];
  KV_ASSERT(p.state == PhysicalState::kCached, "pool entry for a block that is not cached");
  KV_ASSERT(p.home == stream && p.capacity >= rounded, "pool entry in the wrong pool");
  p.state = PhysicalState::kLive;
  return index;
}

void CallocFree::operator()(std::byte* p) const noexcept {
  std::free(p);
}

std::optional<PhysicalIndex> CachingAllocator::create(MemoryKind kind, size_t rounded,
                                                      StreamId stream) {
  size_t& used = kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_;
  const size_t limit =
      kind == MemoryKind::kDevice ? limits_.device_bytes_max : limits_.host_bytes_max;
  if (limit != 0 && (rounded > limit || used > limit - rounded)) return std::nullopt;
  KV_ASSERT(blocks_.size() < UINT32_MAX, "too many physical blocks");
  used += rounded;
  PhysicalBlock p;
  // Zeros, like the value-initialised array it replaces, but touched lazily (see data).
  p.data.reset(static_cast<std::byte*>(std::calloc(rounded, 1)));
  if (p.data == nullptr) {
    used -= rounded;
    throw std::bad_alloc();
  }
  p.capacity = rounded;
  p.kind = kind;
  p.home = stream;
  p.state = PhysicalState::kLive;
  blocks_.push_back(std::move(p));
  return static_cast<PhysicalIndex>(blocks_.size() - 1);
}

PhysicalBlock& CachingAllocator::live_block(const Block& block, const char* what) {
  const std::optional<PhysicalIndex> index = physical_of(block.id);
  KV_ASSERT(index.has_value(), std::string(what) + " of block " + std::to_string(block.id) +
                                   " that was never allocated");
  PhysicalBlock& p = blocks_[*index];
  KV_ASSERT(p.live_id == block.id, std::string(what) + " of block " + std::to_string(block.id) +
                                       " that is not live (already freed)");
  return p;
}

void CachingAllocator::record_stream(const Block& block, StreamId stream) {
  PhysicalBlock& p = live_block(block, "record_stream");
  if (p.kind == MemoryKind::kPinnedHost) return;  // not cached: nothing to defer
  if (stream != p.home) p.stream_uses.insert(stream);
}

void CachingAllocator::free(const Block& block, const StreamProgress& progress) {
  if (!block.valid()) return;  // like free(nullptr)
  PhysicalBlock& p = live_block(block, "free");
  const PhysicalIndex index = *physical_of(block.id);
  p.live_id = 0;
  p.live_bytes = 0;
  if (p.kind == MemoryKind::kPinnedHost) {
    host_bytes_ -= p.capacity;
    p.data.reset();
    p.state = PhysicalState::kReleased;
    return;
  }
  if (p.stream_uses.empty()) {
    cache(index);
    return;
  }
  // record_stream rule: reusable once every used stream has run what it holds *now*.
  p.state = PhysicalState::kPendingEvents;
  for (StreamId s : p.stream_uses) {
    pending_[s].push_back(PendingFree{.target = progress.enqueued(s), .physical = index});
    ++p.events_pending;
  }
  p.stream_uses.clear();
}

void CachingAllocator::cache(PhysicalIndex index) {
  PhysicalBlock& p = blocks_[index];
  KV_ASSERT(p.kind == MemoryKind::kDevice, "only device blocks are cached");
  p.state = PhysicalState::kCached;
  const bool inserted = pool_.insert({p.home, p.capacity, index}).second;
  KV_ASSERT(inserted, "block cached twice");
}

void CachingAllocator::process_events(const StreamProgress& progress) {
  for (auto& [stream, queue] : pending_) {
    while (!queue.empty() && progress.executed(stream) >= queue.front().target) {
      PhysicalBlock& p = blocks_[queue.front().physical];
      KV_ASSERT(p.state == PhysicalState::kPendingEvents && p.events_pending > 0,
                "event for a block that is not waiting");
      if (--p.events_pending == 0) cache(queue.front().physical);
      queue.pop_front();
    }
  }
}

std::optional<PhysicalIndex> CachingAllocator::physical_of(uint64_t id) const {
  if (id == 0 || id > physical_of_id_.size()) return std::nullopt;
  return physical_of_id_[id - 1];
}

const PhysicalBlock& CachingAllocator::physical(PhysicalIndex index) const {
  KV_ASSERT(index < blocks_.size(), "unknown physical block");
  return blocks_[index];
}

std::byte* CachingAllocator::data(PhysicalIndex index) {
  KV_ASSERT(index < blocks_.size(), "unknown physical block");
  return blocks_[index].data.get();
}

bool CachingAllocator::is_live(const Block& block) const {
  const std::optional<PhysicalIndex> index = physical_of(block.id);
  return index.has_value() && blocks_[*index].live_id == block.id;
}

const HandoutRecord* CachingAllocator::successor(PhysicalIndex index, uint64_t id) const {
  const std::vector<HandoutRecord>& h = physical(index).handouts;
  auto it = std::upper_bound(h.begin(), h.end(), id,
                             [](uint64_t v, const HandoutRecord& r) { return v < r.id; });
  return it == h.end() ? nullptr : &*it;
}

void CachingAllocator::forget_handouts_before(PhysicalIndex index, uint64_t oldest_needed) {
  KV_ASSERT(index < blocks_.size(), "unknown physical block");
  std::vector<HandoutRecord>& h = blocks_[index].handouts;
  auto keep = std::lower_bound(h.begin(), h.end(), oldest_needed,
                               [](const HandoutRecord& r, uint64_t v) { return r.id < v; });
  if (keep == h.end() && !h.empty()) --keep;  // always keep the latest
  h.erase(h.begin(), keep);
}

size_t CachingAllocator::pending_frees() const {
  size_t n = 0;
  for (const auto& [stream, queue] : pending_)
    n += queue.size();
  return n;
}

std::string CachingAllocator::check() const {
  size_t device = 0;
  size_t host = 0;
  size_t cached = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const PhysicalBlock& p = blocks_[i];
    // Built only for a report: the simulator runs this check at every full check.
    auto name = [i] { return "physical block " + std::to_string(i); };
    if ((p.state == PhysicalState::kLive) != (p.live_id != 0)) return name() + ": live state";
    if ((p.state == PhysicalState::kReleased) != (p.data == nullptr)) return name() + ": released";
    if ((p.state == PhysicalState::kPendingEvents) != (p.events_pending != 0))
      return name() + ": pending events";
    if (p.kind == MemoryKind::kPinnedHost &&
        (p.state == PhysicalState::kCached || p.state == PhysicalState::kPendingEvents))
      return name() + ": pinned host block cached";
    if (p.state == PhysicalState::kCached) {
      ++cached;
      if (pool_.count({p.home, p.capacity, static_cast<PhysicalIndex>(i)}) != 1)
        return name() + ": cached but not in its pool";
    }
    if (p.kind == MemoryKind::kDevice) device += p.capacity;
    if (p.kind == MemoryKind::kPinnedHost && p.state != PhysicalState::kReleased)
      host += p.capacity;
  }
  if (cached != pool_.size()) return "pool holds blocks that are not cached";
  if (device != device_bytes_) return "device bytes accounting";
  if (host != host_bytes_) return "host bytes accounting";
  return "";
}

MemoryCensus CachingAllocator::census(const StreamProgress& progress) const {
  MemoryCensus c;
  c.device_reserved_bytes = device_bytes_;
  c.host_in_use_bytes = host_bytes_;
  c.problem = check();
  auto fail = [&c](const std::string& what) {
    if (c.problem.empty()) c.problem = what;
  };
  // Deferred frees: how many snapshots each pending block still waits for, by the queues.
  std::map<PhysicalIndex, uint32_t> waits;
  for (const auto& [stream, queue] : pending_) {
    for (const PendingFree& f : queue) {
      ++waits[f.physical];
      if (f.target > progress.enqueued(stream)) {
        fail("a deferred free on stream " + std::to_string(stream) +
             " waits for an op that stream has not enqueued");
      }
    }
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const PhysicalBlock& p = blocks_[i];
    auto name = [i] { return "physical block " + std::to_string(i); };
    const auto w = waits.find(static_cast<PhysicalIndex>(i));
    const uint32_t queued = w == waits.end() ? 0 : w->second;
    if (p.state != PhysicalState::kPendingEvents && queued != 0) {
      fail(name() + " is not waiting to be freed, yet " + std::to_string(queued) +
           " deferred free(s) name it");
    }
    switch (p.state) {
      case PhysicalState::kLive: {
        const std::optional<PhysicalIndex> back = physical_of(p.live_id);
        if (!back || *back != i) fail(name() + ": its live handout maps to another block");
        if (p.live_bytes > p.capacity) fail(name() + ": live handout larger than the block");
        if (p.handouts.empty() || p.handouts.back().id != p.live_id) {
          fail(name() + ": the live handout's record is lost");
        }
        c.add_live(LiveBlock{.block = Block{.id = p.live_id,
                                            .ptr = p.data.get(),
                                            .bytes = p.live_bytes,
                                            .kind = p.kind},
                             .label = p.handouts.empty() ? std::string() : p.handouts.back().label},
                   p.capacity);
        break;
      }
      case PhysicalState::kPendingEvents:
        c.add_pending(p.kind, p.capacity);
        if (queued != p.events_pending) {
          fail(name() + " waits for " + std::to_string(p.events_pending) +
               " stream(s) but the deferred-free queues hold " + std::to_string(queued));
        }
        break;
      case PhysicalState::kCached:
        c.add_cached(p.capacity);
        break;
      case PhysicalState::kReleased:
        break;
    }
  }
  c.finish(pool_.size());
  return c;
}

}  // namespace kvsim
