// PyTree's calls (py_tree.h): match_prefix, insert, lock / unlock (and SGLang's lock_ref /
// unlock_ref), evict. Each runs under the tree's mutex through run(), the GIL released for
// large calls; a recording writes the call's op before the core runs it and its key, value and
// outcome after, and the call's results (node ids, slots) are read before the mutex is released.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "python/src/int_buffer.h"
#include "python/src/py_tree.h"
#include "python/src/slot_arrays.h"
#include "sim/trace/call_trace.h"

namespace py = pybind11;

namespace kvsim::python {

py::tuple PyTree::match_prefix(py::handle tokens_obj, Namespace ns) {
  Tokens tokens(tokens_obj, "tokens");
  MatchResult r;
  SlotBuffer slots;
  NodeId last = 0;
  run(tokens.size(), [&] {
    // The tree before the call: the footer's sizes if the recording has to end before it.
    size_t nodes_before = 0;
    int64_t evictable_before = 0, protected_before = 0;
    if (recording()) {
      nodes_before = tree_->node_count();
      evictable_before = tree_->evictable_size();
      protected_before = tree_->protected_size();
      tokens.visit([&](auto key) { rec_->begin_match(ns, key); });
    }
    on_fail_ = sim::CallKind::kMatch;
    r = tokens.visit([&](auto key) { return tree_->match_prefix(ns, key); });
    slots = SlotBuffer::filled(r.device_indices.size(),
                               [&](SlotIndex* out) { r.device_indices.copy_slots_to(out); });
    stats_.match_calls += 1;
    stats_.match_tokens += static_cast<int64_t>(aligned(tokens.size()));
    stats_.hit_tokens += r.device_hit_length();
    last = r.last_device_node->id;  // under the mutex: the node may be freed once it is released
    if (recording()) {
      const sim::CallOutcome out{r.device_hit_length(), r.last_device_node->id, 0};
      if (rec_->finish_match(&out)) {
        rec_->finish_call(sim::CallKind::kMatch, &out);
        rec_->produced(out.node);
        after_call();
      } else {
        // A trace holds 32-bit ids; this key matched nothing past one. The recording ends
        // before this call, with the tree as it was then.
        rec_->finish(nodes_before, evictable_before, protected_before, std::nullopt,
                     /*truncated=*/true);
      }
    }
  });
  return py::make_tuple(to_numpy(std::move(slots)), last);
}

py::tuple PyTree::insert(py::handle tokens_obj, py::handle value_obj, Namespace ns) {
  Tokens tokens(tokens_obj, "tokens");
  IntBuffer value(value_obj, "value");
  const size_t n = aligned(tokens.size());
  if (value.size() < n) {
    throw py::value_error("value has " + std::to_string(value.size()) + " slots, fewer than the " +
                          std::to_string(n) + " page-aligned tokens of the key");
  }
  // int64 slots are read in place (int32 ones widened once).
  std::vector<SlotIndex> widened;
  std::span<const SlotIndex> slots;
  if (value.data64() != nullptr) {
    slots = std::span<const SlotIndex>(value.data64(), n);
  } else {
    widened.assign(value.data32(), value.data32() + n);
    slots = widened;
  }
  // The tree's form of slots [b, e), checked and classified in one vectorised pass.
  const auto page = static_cast<size_t>(page_size());
  auto value_of = [&](size_t b, size_t e) {
    const SlotScan scan = scan_slots(slots.data() + b, e - b, page);
    if (scan.all_or < 0) {
      const auto bad =
          static_cast<size_t>(std::find_if(slots.begin() + static_cast<ptrdiff_t>(b), slots.end(),
                                           [](int64_t v) { return v < 0; }) -
                              slots.begin());
      throw py::value_error("value[" + std::to_string(bad) + "] = " + std::to_string(slots[bad]) +
                            " is not a slot index");
    }
    return device_value(slots.subspan(b, e - b), tree_->page_size(), scan.page_runs);
  };
  InsertResult r;
  NodeId last = 0;
  run(n, [&] {
    // The tree before the call: the footer's sizes if the recording has to end before it.
    const bool rec = recording();
    size_t nodes_before = 0;
    int64_t evictable_before = 0, protected_before = 0;
    if (rec) {
      nodes_before = tree_->node_count();
      evictable_before = tree_->evictable_size();
      protected_before = tree_->protected_size();
      tokens.visit([&](auto key) { rec_->begin_insert(ns, key.first(n)); });
    }
    on_fail_ = sim::CallKind::kInsert;
    // Only the slots the tree stores are read and checked (and recorded): a match's part of
    // the key keeps the tree's slots (the caller frees its own as duplicates).
    const RadixTree::InsertValueSource source =
        rec ? RadixTree::InsertValueSource([&](size_t b, size_t e) {
          IndexVector v = value_of(b, e);
          rec_->note_value(b, v);
          return v;
        })
            : RadixTree::InsertValueSource(value_of);
    try {
      r = tokens.visit([&](auto key) { return tree_->insert(ns, key, source); });
    } catch (const AssertionFailure&) {
      throw;  // guarded() records the failing call
    } catch (...) {
      if (rec) rec_->drop_call();  // refused with the tree unchanged: no call to record
      throw;
    }
    stats_.insert_calls += 1;
    stats_.insert_tokens += static_cast<int64_t>(n);
    stats_.new_tokens += static_cast<int64_t>(n) - r.prefix_len;
    // Under the mutex: another thread's evict may free the node once it is released.
    last = r.last_node != nullptr ? r.last_node->id : tree_->root()->id;
    if (recording()) {
      const NodeId node = r.last_node != nullptr ? r.last_node->id : tree_->root()->id;
      const sim::CallOutcome out{r.prefix_len, node, 0};
      if (rec_->value_recordable()) {
        rec_->finish_insert(r.last_node != nullptr ? r.last_node : tree_->root());
        rec_->finish_call(sim::CallKind::kInsert, &out);
        rec_->produced(node);
        after_call();
      } else {
        // The tree read slots in ranges with a gap between them (a refill before a new leaf;
        // never in this device-only tree): the recording ends before this call.
        rec_->drop_call();
        rec_->finish(nodes_before, evictable_before, protected_before, std::nullopt,
                     /*truncated=*/true);
      }
    }
  });
  return py::make_tuple(r.prefix_len, last);
}

PyLock PyTree::lock(NodeId node_id) {
  PyLock out;
  run(0, [&] {
    TreeNode* node = tree_->find(node_id);
    if (node == nullptr)
      throw py::value_error("lock: node " + std::to_string(node_id) + " does not exist");
    if (node->evicted())
      throw py::value_error("lock: node " + std::to_string(node_id) + " is evicted");
    if (recording()) {
      if (rec_->begin_lock_of(node_id)) {
        out.call = rec_->next_index();
      } else {
        stop_recording();  // a node no recorded call returned: the trace could not name it
      }
    }
    on_fail_ = sim::CallKind::kLock;
    const int64_t before = tree_->evictable_size();
    out.record = tree_->lock(*node);
    out.delta = tree_->evictable_size() - before;
    out.node = node_id;
    out.tree = serial_;
    stats_.lock_calls += 1;
    if (out.call >= 0 && recording()) {
      rec_->held(out.call, out.record);
      const sim::CallOutcome none;
      rec_->finish_call(sim::CallKind::kLock, &none);
      after_call();
    }
  });
  return out;
}

int64_t PyTree::unlock(const PyLock& lock) {
  // A caller error, refused before the core sees the record: it names nodes of another tree.
  if (lock.tree != serial_) {
    throw py::value_error("unlock: this Lock (node " + std::to_string(lock.node) +
                          ") was taken on another tree");
  }
  int64_t delta = 0;
  run(0, [&] {
    const bool rec = recording() && rec_->begin_unlock_of(lock.call, lock.record);
    if (recording() && !rec) stop_recording();
    on_fail_ = sim::CallKind::kUnlock;
    const int64_t before = tree_->evictable_size();
    tree_->unlock(lock.record);
    delta = tree_->evictable_size() - before;
    stats_.unlock_calls += 1;
    if (rec && recording()) {
      rec_->released(lock.call);
      const sim::CallOutcome none;
      rec_->finish_call(sim::CallKind::kUnlock, &none);
      after_call();
    }
  });
  return delta;
}

int64_t PyTree::lock_ref(NodeId node_id) {
  PyLock l = lock(node_id);
  ref_locks_[node_id].push_back(l);
  return l.delta;
}

int64_t PyTree::unlock_ref(NodeId node_id) {
  auto it = ref_locks_.find(node_id);
  if (it == ref_locks_.end() || it->second.empty()) {
    throw CallError("dec_lock_ref: node " + std::to_string(node_id) +
                    " holds no lock taken by inc_lock_ref");
  }
  const int64_t delta = unlock(it->second.back());
  it->second.pop_back();
  if (it->second.empty()) ref_locks_.erase(it);
  return delta;
}

py::tuple PyTree::evict(int64_t tokens, bool with_paths) {
  if (tokens < 0)
    throw py::value_error("evict: num_tokens must be >= 0, got " + std::to_string(tokens));
  sim::EvictedLeaves ev;
  SlotBuffer freed;
  run(kReleaseGilTokens, [&] {
    if (recording()) rec_->begin_evict(tokens);
    on_fail_ = sim::CallKind::kEvict;
    ev = sim::evict_device_leaves(*tree_, tokens, with_paths);
    freed = SlotBuffer::filled(static_cast<size_t>(ev.freed_tokens),
                               [&](SlotIndex* out) { ev.copy_slots_to(out); });
    const int64_t done = ev.freed_tokens;
    stats_.evict_calls += 1;
    stats_.evict_requested += tokens;
    stats_.evicted_tokens += done;
    stats_.evicted_nodes += static_cast<int64_t>(ev.nodes.size());
    if (recording()) {
      const sim::CallOutcome out{done, 0, sim::hash_freed_slots(ev, sim::kSlotsHashLatest)};
      rec_->finish_call(sim::CallKind::kEvict, &out);
      for (const auto& [id, n] : ev.nodes)
        rec_->forget(id);
      after_call();
    }
  });
  auto& nodes = ev.nodes;
  auto& paths = ev.paths;
  py::list node_list;
  for (const auto& [id, n] : nodes)
    node_list.append(py::make_tuple(id, n));
  if (!with_paths) return py::make_tuple(to_numpy(std::move(freed)), node_list);
  py::list path_list;
  for (auto& p : paths) {
    path_list.append(py::array_t<int32_t>(static_cast<py::ssize_t>(p.size()), p.data()));
  }
  return py::make_tuple(to_numpy(std::move(freed)), node_list, path_list);
}

}  // namespace kvsim::python
