#include "core/tiers/cache_controller.h"

#include <algorithm>
#include <cstring>

#include "core/common/assert.h"
#include "core/common/probe.h"

namespace kvsim {

int LayerDoneCounter::update_producer(Backend& backend) {
  producer_ = (producer_ + 1) % kSlots;
  // The slot's previous load must have landed before its events are reused. SGLang asserts
  // this; here the driver may hold the load stream back on purpose, so wait instead.
  if (!events_[static_cast<size_t>(producer_)].empty()) {
    backend.synchronize_event(events_[static_cast<size_t>(producer_)].back());
  }
  events_[static_cast<size_t>(producer_)].assign(static_cast<size_t>(layer_count_), EventId{});
  return producer_;
}

void LayerDoneCounter::set_layer_event(int producer, int32_t layer, EventId event) {
  KV_ASSERT(producer >= 0 && producer < kSlots, "producer index out of range");
  events_[static_cast<size_t>(producer)].at(static_cast<size_t>(layer)) = event;
}

void LayerDoneCounter::wait_until(Backend& backend, StreamId stream, int32_t layer) const {
  if (consumer_ < 0) return;
  const auto& events = events_[static_cast<size_t>(consumer_)];
  KV_ASSERT(static_cast<size_t>(layer) < events.size(), "layer out of range");
  const EventId e = events[static_cast<size_t>(layer)];
  if (e.valid()) backend.wait_event(stream, e);
}

std::string LayerDoneCounter::check(int producer) const {
  if (producer < 0 || producer >= kSlots) return "producer index out of range";
  const auto& events = events_[static_cast<size_t>(producer)];
  if (events.size() != static_cast<size_t>(layer_count_)) return "the load has no layer events";
  for (size_t layer = 0; layer < events.size(); ++layer) {
    if (!events[layer].valid()) {
      return "layer " + std::to_string(layer) + " has no event: a forward would not wait for it";
    }
    if (layer > 0 && events[layer].value <= events[layer - 1].value) {
      return "layer " + std::to_string(layer) + "'s event precedes layer " +
             std::to_string(layer - 1) + "'s";
    }
  }
  return "";
}

CacheController::CacheController(Backend& backend, DeviceKVPool& device_pool,
                                 PagedSlotAllocator& device_slots, HostKVPool& host_pool,
                                 PagedSlotAllocator& host_slots, CacheControllerOptions options)
    : backend_(backend),
      device_pool_(device_pool),
      device_slots_(device_slots),
      host_pool_(host_pool),
      host_slots_(host_slots),
      options_(options),
      write_stream_(backend.create_stream("write")),
      load_stream_(backend.create_stream("load")),
      layer_done_(device_pool.view().layer_count) {
  KV_ASSERT(device_pool.view().layer_count == host_pool.view().layer_count, "layer counts differ");
  KV_ASSERT(device_pool.view().item_bytes == host_pool.view().item_bytes, "item sizes differ");
}

Block CacheController::upload_indices(const IndexVector& indices, const std::string& label) {
  static_assert(sizeof(SlotIndex) == 8, "index buffers hold int64");
  const size_t bytes = indices.size() * sizeof(SlotIndex);
  const StreamId compute = backend_.compute_stream();
  Block block = backend_.allocate(MemoryKind::kDevice, bytes, compute, label);
  KV_ASSERT(block.valid(), "out of device memory for an index buffer");
  backend_.upload_async(compute, block, 0, std::as_bytes(indices.span()), label);
  ++live_index_buffers_;
  return block;
}

ResolvedIndices CacheController::move_indices(const IndexVector& src, const IndexVector& dst) {
  KV_ASSERT(src.size() == dst.size(), "Source and destination indices must have the same length");
  KV_ASSERT(src.residency() == Residency::kHost && dst.residency() == Residency::kHost,
            "move_indices takes host-resident indices");
  // New objects: the tree's vectors stay host-resident whatever happens to these (seed 001).
  return ResolvedIndices{
      IndexVector::on_device(src.tier(), src.to_vector(),
                             upload_indices(src, std::string(kSrcIndicesLabel))),
      IndexVector::on_device(dst.tier(), dst.to_vector(),
                             upload_indices(dst, std::string(kDstIndicesLabel)))};
}

void CacheController::release_after(const ResolvedIndices& indices, StreamId stream) {
  // Seed 000: the copy on `stream` reads these buffers after we drop them here.
  backend_.record_stream(indices.src.device_block(), stream);
  backend_.record_stream(indices.dst.device_block(), stream);
  backend_.free(indices.src.device_block());
  backend_.free(indices.dst.device_block());
  live_index_buffers_ -= 2;
  KV_ASSERT(live_index_buffers_ >= 0, "more index buffers released than uploaded");
}

void CacheController::add_side_pool(PoolName name, DeviceKVPool& device_pool,
                                    HostKVPool& host_pool) {
  KV_ASSERT(name != PoolName::kKv, "the main KV pool is not a side pool");
  KV_ASSERT(device_pool.layer_count() == host_pool.layer_count() &&
                device_pool.item_bytes() == host_pool.item_bytes(),
            "side pool device and host geometry differ");
  side_pools_[static_cast<size_t>(name)] = SidePoolViews{&device_pool, &host_pool};
}

bool CacheController::has_side_pool(PoolName name) const {
  return side_pools_[static_cast<size_t>(name)].device != nullptr;
}

std::vector<ResolvedPoolTransfer> CacheController::resolve_pool_transfers(
    const std::vector<PoolTransfer>& transfers, bool to_host) {
  std::vector<ResolvedPoolTransfer> resolved;
  for (const PoolTransfer& pt : transfers) {
    KV_ASSERT(has_side_pool(pt.pool),
              "transfer for unregistered pool " + std::string(to_string(pt.pool)));
    KV_ASSERT(pt.host_indices.size() == pt.device_indices.size(),
              "pool transfer sides differ in length");
    if (pt.host_indices.empty()) continue;
    // New objects, never written back into `pt` or into the tree state it was copied from.
    resolved.push_back(ResolvedPoolTransfer{
        .pool = pt.pool,
        .to_host = to_host,
        .indices = to_host ? move_indices(pt.device_indices, pt.host_indices)
                           : move_indices(pt.host_indices, pt.device_indices)});
  }
  check_resolved(transfers, to_host, resolved);
  return resolved;
}

void CacheController::issue_pool_transfers(StreamId stream,
                                           const std::vector<ResolvedPoolTransfer>& resolved,
                                           const std::string& label) {
  for (const ResolvedPoolTransfer& rt : resolved) {
    const SidePoolViews& pool = side_pools_[static_cast<size_t>(rt.pool)];
    KVTransfer t{.src = rt.to_host ? pool.device->view() : pool.host->view(),
                 .dst = rt.to_host ? pool.host->view() : pool.device->view(),
                 .src_indices = rt.indices.src.device_block(),
                 .dst_indices = rt.indices.dst.device_block(),
                 .count = rt.indices.src.size(),
                 .layer_begin = 0,
                 .layer_end = pool.device->layer_count(),
                 .label = label + " " + std::string(to_string(rt.pool))};
    backend_.transfer_kv_async(stream, t);
    release_after(rt.indices, stream);  // seed 000: side-pool indices too
  }
}

std::optional<IndexVector> CacheController::write(const IndexVector& device_indices, NodeId node,
                                                  const std::vector<PoolTransfer>& extra) {
  KV_ASSERT(device_indices.tier() == Tier::kDevice, "write takes device slots");
  KV_ASSERT(device_indices.size() % static_cast<size_t>(options_.page_size) == 0,
            "The requested size should be a multiple of the page size.");
  std::optional<IndexVector> host = host_slots_.alloc(static_cast<int64_t>(device_indices.size()));
  if (!host) {
    KV_PROBE(ctl_write_no_host);
    return std::nullopt;
  }
  // [transfer.result] the backup's host slots: one per device slot, of the host pool.
  KV_ASSERT(host->size() == device_indices.size() && host->tier() == Tier::kHost,
            "transfer.result: a write of " + std::to_string(device_indices.size()) +
                " slot(s) got " + std::to_string(host->size()) + " host slot(s)");
  const OpId id = next_op_id_++;
  const std::string label = "write op " + std::to_string(id);
  ResolvedIndices moved = move_indices(device_indices, *host);
  const std::vector<ResolvedPoolTransfer> side = resolve_pool_transfers(extra, /*to_host=*/true);
  const EventId start = backend_.record_event(backend_.compute_stream());
  backend_.wait_event(write_stream_, start);
  KVTransfer t{.src = device_pool_.view(),
               .dst = host_pool_.view(),
               .src_indices = moved.src.device_block(),
               .dst_indices = moved.dst.device_block(),
               .count = device_indices.size(),
               .layer_begin = 0,
               .layer_end = device_pool_.view().layer_count,
               .label = label};
  backend_.transfer_kv_async(write_stream_, t);
  release_after(moved, write_stream_);
  issue_pool_transfers(write_stream_, side, label);
  const EventId finish = backend_.record_event(write_stream_);
  KV_ASSERT(write_acks_.empty() || write_acks_.back().id < id,
            "transfer.result: write ack ids out of issue order");
  write_acks_.push_back(
      TransferAck{id, {node}, static_cast<int64_t>(device_indices.size()), finish});
  return host;
}

std::optional<IndexVector> CacheController::load(const IndexVector& host_indices, NodeId node,
                                                 const std::vector<PoolTransfer>& extra) {
  KV_ASSERT(host_indices.tier() == Tier::kHost, "load takes host slots");
  KV_ASSERT(host_indices.size() % static_cast<size_t>(options_.page_size) == 0,
            "The requested size should be a multiple of the page size.");
  KV_ASSERT(!host_indices.empty() || !extra.empty(), "load of nothing");
  std::optional<IndexVector> device =
      host_indices.empty() ? IndexVector(Tier::kDevice, {})
                           : device_slots_.alloc(static_cast<int64_t>(host_indices.size()));
  if (!device) {
    KV_PROBE(ctl_load_no_device);
    return std::nullopt;
  }
  load_queue_.push_back(QueuedLoad{next_op_id_++, host_indices, *device, node, extra});
  KV_ASSERT(device->size() == host_indices.size() && device->tier() == Tier::kDevice &&
                load_queue_.back().node == node && load_queue_.back().device_indices == *device,
            "transfer.result: a load of " + std::to_string(host_indices.size()) +
                " host slot(s) queued " + std::to_string(device->size()) + " device slot(s)");
  return device;
}

bool CacheController::load_queued(NodeId node) const {
  return std::any_of(load_queue_.begin(), load_queue_.end(),
                     [&](const QueuedLoad& op) { return op.node == node; });
}

void CacheController::wait_for_loads_of(NodeId node, StreamId stream) {
  for (const QueuedLoad& op : load_queue_) {
    KV_ASSERT(op.node != node, "a read of node " + std::to_string(node) +
                                   " while its load is queued and not issued "
                                   "(ready_to_load_host_cache first)");
  }
  for (const TransferAck& ack : load_acks_) {
    if (std::find(ack.node_ids.begin(), ack.node_ids.end(), node) != ack.node_ids.end()) {
      backend_.wait_event(stream, ack.finish);
    }
  }
}

namespace {
// By value: a queued load that is issued moves its indices in, a query copies them.
void append_sources(NodeId node, IndexVector host, std::vector<PoolTransfer> extra,
                    std::vector<LoadSource>& out) {
  if (!host.empty()) out.push_back(LoadSource{node, PoolName::kKv, std::move(host)});
  for (PoolTransfer& pt : extra) {
    if (!pt.host_indices.empty()) {
      out.push_back(LoadSource{node, pt.pool, std::move(pt.host_indices)});
    }
  }
}
}  // namespace

std::vector<LoadSource> CacheController::load_sources() const {
  std::vector<LoadSource> out;
  for (const TransferAck& ack : load_acks_)
    out.insert(out.end(), ack.sources.begin(), ack.sources.end());
  for (const QueuedLoad& op : load_queue_)
    append_sources(op.node, op.host_indices, op.extra, out);
  return out;
}

int CacheController::start_loading() {
  if (load_queue_.empty()) return -1;
  const int producer = layer_done_.update_producer(backend_);
  latest_issued_ = producer;
  const QueueSummary queued = check_queue_summary();
  IndexVector host(Tier::kHost, {});
  IndexVector device(Tier::kDevice, {});
  TransferAck ack;
  ack.id = load_queue_.front().id;
  // Side-pool transfers merged per pool, in pool order (SGLang merges per pool name).
  std::vector<PoolTransfer> extra;
  for (const QueuedLoad& op : load_queue_) {
    host.append(op.host_indices);
    device.append(op.device_indices);
    ack.node_ids.push_back(op.node);
    for (const PoolTransfer& pt : op.extra) {
      auto it = std::find_if(extra.begin(), extra.end(),
                             [&](const PoolTransfer& e) { return e.pool == pt.pool; });
      if (it == extra.end()) {
        extra.push_back(pt);
        continue;
      }
      KV_PROBE(ctl_side_transfers_merged);
      it->host_indices.append(pt.host_indices);
      it->device_indices.append(pt.device_indices);
      it->nodes.insert(it->nodes.end(), pt.nodes.begin(), pt.nodes.end());
    }
  }
  std::sort(extra.begin(), extra.end(),
            [](const PoolTransfer& a, const PoolTransfer& b) { return a.pool < b.pool; });
  KV_PROBE_IF(load_queue_.size() > 1, ctl_loads_merged);
  for (QueuedLoad& op : load_queue_)  // the copy reads these until its ack
    append_sources(op.node, std::move(op.host_indices), std::move(op.extra), ack.sources);
  load_queue_.clear();
  ack.tokens = static_cast<int64_t>(host.size());
  const std::string label = "load op " + std::to_string(ack.id);
  // Index uploads go on the compute stream, so resolve before recording the start event.
  const std::vector<ResolvedPoolTransfer> side = resolve_pool_transfers(extra, /*to_host=*/false);
  std::optional<ResolvedIndices> moved;
  if (!host.empty()) moved = move_indices(host, device);
  // After every compute already enqueued: it may still read the recycled device slots.
  const EventId start = backend_.record_event(backend_.compute_stream());
  backend_.wait_event(load_stream_, start);
  // Side pools first, so layer 0's event also covers them (a forward needs both).
  issue_pool_transfers(load_stream_, side, label);
  if (!moved) {  // an aux-only load (e.g. a Mamba state under a device-resident prefix)
    KV_PROBE(ctl_aux_only_load);
    for (int32_t layer = 0; layer < device_pool_.view().layer_count; ++layer) {
      layer_done_.set_layer_event(producer, layer, backend_.record_event(load_stream_));
    }
    ack.finish = backend_.record_event(load_stream_);
    load_acks_.push_back(std::move(ack));
    const std::string problem = layer_done_.check(producer);
    KV_ASSERT(problem.empty(), "load.layer_events: aux-only " + label + ": " + problem);
    check_started(queued, host, device, extra);
    return producer;
  }
  const int32_t layers = device_pool_.view().layer_count;
  for (int32_t layer = 0; layer < layers; ++layer) {
    KVTransfer t{.src = host_pool_.view(),
                 .dst = device_pool_.view(),
                 .src_indices = moved->src.device_block(),
                 .dst_indices = moved->dst.device_block(),
                 .count = host.size(),
                 .layer_begin = layer,
                 .layer_end = layer + 1,
                 .label = label + " layer " + std::to_string(layer)};
    backend_.transfer_kv_async(load_stream_, t);
    layer_done_.set_layer_event(producer, layer, backend_.record_event(load_stream_));
  }
  ack.finish = backend_.record_event(load_stream_);
  release_after(*moved, load_stream_);
  load_acks_.push_back(std::move(ack));
  const std::string problem = layer_done_.check(producer);
  KV_ASSERT(problem.empty(), "load.layer_events: " + label + ": " + problem);
  check_started(queued, host, device, extra);
  return producer;
}

std::vector<TransferAck> CacheController::pop_completed(std::deque<TransferAck>& queue) {
  std::vector<TransferAck> done;
  while (!queue.empty() && backend_.query_event(queue.front().finish)) {
    done.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  return done;
}

std::vector<TransferAck> CacheController::poll_write_acks() {
  std::vector<TransferAck> done = pop_completed(write_acks_);
  check_polled(done, write_acks_);
  KV_PROBE_IF(done.size() > 1, ctl_several_write_acks);
  return done;
}
std::vector<TransferAck> CacheController::poll_load_acks() {
  std::vector<TransferAck> done = pop_completed(load_acks_);
  check_polled(done, load_acks_);
  KV_PROBE_IF(done.size() > 1, ctl_several_load_acks);
  return done;
}

// --- Result checks: what a call hands back, against its inputs (read only: no event query).

CacheController::QueueSummary CacheController::check_queue_summary() const {
  QueueSummary q;
  if (!load_queue_.empty()) q.first_id = load_queue_.front().id;
  for (const QueuedLoad& op : load_queue_) {
    q.nodes.push_back(op.node);
    q.tokens[static_cast<size_t>(PoolName::kKv)] += static_cast<int64_t>(op.host_indices.size());
    for (const PoolTransfer& pt : op.extra)
      q.tokens[static_cast<size_t>(pt.pool)] += static_cast<int64_t>(pt.host_indices.size());
  }
  return q;
}

void CacheController::check_started(const QueueSummary& queued, const IndexVector& host,
                                    const IndexVector& device,
                                    const std::vector<PoolTransfer>& extra) const {
  // [transfer.result] the issued load is the queue, merged: every queued load in it once, in
  // queue order, its ack named by the first one's id and counting the main pool's tokens.
  KV_ASSERT(load_queue_.empty() && !load_acks_.empty(),
            "transfer.result: start_loading left loads queued");
  const TransferAck& ack = load_acks_.back();
  const int64_t kv_tokens = queued.tokens[static_cast<size_t>(PoolName::kKv)];
  KV_ASSERT(ack.id == queued.first_id && ack.id != 0 && ack.node_ids == queued.nodes &&
                ack.tokens == kv_tokens && static_cast<int64_t>(host.size()) == kv_tokens &&
                device.size() == host.size(),
            "transfer.result: load ack " + std::to_string(ack.id) + " for " +
                std::to_string(ack.node_ids.size()) + " node(s), " + std::to_string(ack.tokens) +
                " token(s); the queue held " + std::to_string(queued.nodes.size()) +
                " load(s) from op " + std::to_string(queued.first_id) + ", " +
                std::to_string(kv_tokens) + " token(s)");
  KV_ASSERT(load_acks_.size() < 2 || load_acks_[load_acks_.size() - 2].id < ack.id,
            "transfer.result: load ack ids out of issue order");
  // Side pools: one merged transfer per pool, in pool order, each carrying the pool's tokens;
  // the ack's sources name the same host slots per pool.
  std::array<int64_t, kPoolNamesMax> merged{};
  std::array<int64_t, kPoolNamesMax> sourced{};
  for (size_t i = 0; i < extra.size(); ++i) {
    KV_ASSERT(i == 0 || extra[i - 1].pool < extra[i].pool,
              "transfer.result: merged side-pool transfers not one per pool in pool order");
    KV_ASSERT(extra[i].host_indices.size() == extra[i].device_indices.size(),
              "transfer.result: a merged side-pool transfer's sides differ in length");
    merged[static_cast<size_t>(extra[i].pool)] +=
        static_cast<int64_t>(extra[i].host_indices.size());
  }
  for (const LoadSource& src : ack.sources)
    sourced[static_cast<size_t>(src.pool)] += static_cast<int64_t>(src.host.size());
  for (size_t p = 0; p < kPoolNamesMax; ++p) {
    const int64_t want = queued.tokens[p];
    KV_ASSERT(sourced[p] == want && (p == static_cast<size_t>(PoolName::kKv) || merged[p] == want),
              "transfer.result: pool " + std::to_string(p) + ": the queue held " +
                  std::to_string(want) + " host slot(s), the merged transfer carries " +
                  std::to_string(merged[p]) + " and the ack's sources " +
                  std::to_string(sourced[p]));
  }
}

void CacheController::check_resolved(const std::vector<PoolTransfer>& transfers, bool to_host,
                                     const std::vector<ResolvedPoolTransfer>& resolved) {
  // [transfer.result] one resolved copy per non-empty transfer, in order, in its direction,
  // each side a copy of the transfer's slots.
  size_t r = 0;
  for (const PoolTransfer& pt : transfers) {
    if (pt.host_indices.empty()) continue;
    KV_ASSERT(r < resolved.size(), "transfer.result: a side-pool transfer was not resolved");
    const ResolvedPoolTransfer& rt = resolved[r++];
    const IndexVector& src = to_host ? pt.device_indices : pt.host_indices;
    const IndexVector& dst = to_host ? pt.host_indices : pt.device_indices;
    KV_ASSERT(rt.pool == pt.pool && rt.to_host == to_host &&
                  rt.indices.src.to_vector() == src.to_vector() &&
                  rt.indices.dst.to_vector() == dst.to_vector() &&
                  rt.indices.src.tier() == src.tier() && rt.indices.dst.tier() == dst.tier(),
              "transfer.result: a resolved " + std::string(to_string(pt.pool)) +
                  " transfer is not its transfer's slots in the copy's direction");
  }
  KV_ASSERT(r == resolved.size(), "transfer.result: more resolved transfers than transfers");
}

void CacheController::check_polled(const std::vector<TransferAck>& done,
                                   const std::deque<TransferAck>& rest) {
  // [transfer.result] acks come back in issue order, each once: ids increase through the
  // popped ones and on into what stays queued.
  for (size_t i = 1; i < done.size(); ++i)
    KV_ASSERT(done[i - 1].id < done[i].id, "transfer.result: acks polled out of issue order");
  KV_ASSERT(done.empty() || rest.empty() || done.back().id < rest.front().id,
            "transfer.result: an ack polled ahead of an older one still queued");
}

// --- Conservation of the backend's memory (invariant backend.memory_owned; read only).

std::string CacheController::memory_problem() const {
  return check_memory(nullptr);
}

std::string CacheController::memory_problem(std::span<const Block> outside) const {
  return check_memory(&outside);
}

std::string CacheController::check_memory(const std::span<const Block>* outside) const {
  const MemoryCensus census = backend_.memory_census();
  if (!census.problem.empty()) return "the backend's accounting: " + census.problem;
  // The owners this controller can name, each with the block it holds.
  struct Owner {
    std::string name;
    Block block;
    size_t bytes = 0;  // 0: any size (an outside block)
    bool found = false;
  };
  std::vector<Owner> owners;
  auto pool = [&owners](std::string name, const KVPool& p) {
    owners.push_back(Owner{std::move(name), p.block(), p.view().total_bytes()});
  };
  pool("the device KV pool", device_pool_);
  pool("the host KV pool", host_pool_);
  for (size_t i = 0; i < side_pools_.size(); ++i) {
    if (side_pools_[i].device == nullptr) continue;
    const std::string name(to_string(static_cast<PoolName>(i)));
    pool("the " + name + " device pool", *side_pools_[i].device);
    pool("the " + name + " host pool", *side_pools_[i].host);
  }
  if (outside != nullptr) {
    for (const Block& b : *outside) {
      if (b.valid()) owners.push_back(Owner{"an outside owner", b, 0});
    }
  }
  for (size_t i = 0; i < owners.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (owners[j].block.id == owners[i].block.id) {
        return "block " + std::to_string(owners[i].block.id) + " is named by both " +
               owners[j].name + " and " + owners[i].name;
      }
    }
  }
  auto describe = [](const LiveBlock& b) {
    return "block " + std::to_string(b.block.id) + " '" + b.label + "' (" +
           std::to_string(b.block.bytes) + " bytes of " +
           std::string(to_string(residency_of(b.block.kind))) + " memory)";
  };
  int64_t src = 0;
  int64_t dst = 0;
  for (const LiveBlock& live : census.live) {
    auto owner = std::find_if(owners.begin(), owners.end(),
                              [&](const Owner& o) { return o.block.id == live.block.id; });
    if (owner != owners.end()) {
      const Block& b = owner->block;
      if (b.ptr != live.block.ptr || b.kind != live.block.kind || b.bytes != live.block.bytes ||
          (owner->bytes != 0 && b.bytes != owner->bytes)) {
        return owner->name + "'s block does not match the backend's " + describe(live);
      }
      owner->found = true;
      continue;
    }
    const bool is_src = live.label == kSrcIndicesLabel;
    if (is_src || live.label == kDstIndicesLabel) {
      if (live.block.kind != MemoryKind::kDevice || live.block.bytes % sizeof(SlotIndex) != 0) {
        return "index buffer " + describe(live) + " is not a device array of slot indices";
      }
      ++(is_src ? src : dst);
      continue;
    }
    if (outside != nullptr) return describe(live) + " is owned by no one the cache can name (leak)";
  }
  for (const Owner& o : owners) {
    if (!o.found) {
      return o.name + "'s block " + std::to_string(o.block.id) +
             " is not live in the backend (freed under its owner)";
    }
  }
  if (src + dst != live_index_buffers_ || src != dst) {
    return "the backend holds " + std::to_string(src + dst) + " live transfer index buffer(s) (" +
           std::to_string(src) + " src, " + std::to_string(dst) + " dst); the controller counts " +
           std::to_string(live_index_buffers_) +
           (src + dst > live_index_buffers_
                ? ": release_after counted buffers as given back that were never freed (leak)"
                : ": buffers were freed that the controller still counts");
  }
  return "";
}

}  // namespace kvsim
