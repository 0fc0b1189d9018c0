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
      IndexVector::on_device(src.tier(), src.to_vector(), upload_indices(src, "src indices")),
      IndexVector::on_device(dst.tier(), dst.to_vector(), upload_indices(dst, "dst indices"))};
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
  KV_PROBE_IF(done.size() > 1, ctl_several_write_acks);
  return done;
}
std::vector<TransferAck> CacheController::poll_load_acks() {
  std::vector<TransferAck> done = pop_completed(load_acks_);
  KV_PROBE_IF(done.size() > 1, ctl_several_load_acks);
  return done;
}

}  // namespace kvsim
