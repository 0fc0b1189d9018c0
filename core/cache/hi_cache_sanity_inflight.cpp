// HiCache::sanity_check, the in-flight part: the pending writes, loads, storage backups and
// prefetches, and the markers and host protections they leave on tree nodes, recomputed from
// the operation lists that own them (the rest of the full check: hi_cache_sanity.cpp).
#include <map>
#include <set>
#include <string>

#include "core/cache/hi_cache.h"

namespace kvsim {

void HiCache::check_inflight(SanityReport& report) const {
  for (const auto& [id, pending] : pending_writes_) {
    const TreeNode* n = tree_->find(id);
    if (n == nullptr || n->evicted() || n->full().lock_ref <= 0 || !n->backed_up()) {
      report.add("inflight.locked", "pending write's node is not locked on device with a host copy",
                 id);
    }
  }
  for (const auto& [id, pending] : pending_loads_) {
    const TreeNode* n = tree_->find(id);
    if (n == nullptr || n->evicted() || n->full().lock_ref <= 0) {
      report.add("inflight.locked", "pending load's node is not locked on device", id);
    }
    for (NodeId p : pending.protected_nodes) {
      const TreeNode* pn = tree_->find(p);
      if (pn == nullptr || pn->full().host_lock_ref <= 0) {
        report.add("inflight.locked", "pending load's source is not host-protected", p);
      }
    }
  }
  check_load_sources(report);
  int64_t occupied = 0;
  const int64_t page = options_.page_size;
  for (const auto& [rid, op] : prefetches_) {
    occupied += op.occupied_tokens;
    const TreeNode* anchor = tree_->find(op.anchor);
    if (anchor == nullptr || (!anchor->is_root() && anchor->full().host_lock_ref <= 0)) {
      report.add("prefetch.accounting", "prefetch anchor is not host-protected", op.anchor);
    }
    if (op.host_indices) {
      const auto allocated = static_cast<int64_t>(op.host_indices->size());
      if (allocated % page != 0 || op.completed_tokens % page != 0 ||
          op.completed_tokens > allocated || allocated != op.hit_tokens) {
        report.add("prefetch.accounting",
                   "prefetch " + std::to_string(rid) + " host slots misaligned or over-counted");
      }
    }
  }
  // [host_protection.owned] every host protection belongs to a live operation: a pending load
  // (its source nodes), a storage backup (queued or finished and not yet acknowledged) or a
  // prefetch (its anchor). A protection nobody owns is never given back: the node's host copy
  // can never be evicted again.
  std::map<NodeId, int64_t> owners;
  for (const auto& [id, pending] : pending_loads_) {
    for (NodeId p : pending.protected_nodes)
      ++owners[p];
  }
  for (const PendingBackup& b : backups_)
    ++owners[b.node];
  for (NodeId id : finished_backups_)
    ++owners[id];
  for (const auto& [rid, op] : prefetches_)
    ++owners[op.anchor];
  tree_->for_each_node([&](const TreeNode& n) {
    const auto it = owners.find(n.id);
    const int64_t owned = it == owners.end() ? 0 : it->second;
    if (n.full().host_lock_ref != owned) {
      report.add("host_protection.owned",
                 "host_lock_ref " + std::to_string(n.full().host_lock_ref) + " but " +
                     std::to_string(owned) + " live operation(s) own a protection",
                 n.id);
    }
  });
  if (occupied != prefetch_tokens_occupied_) {
    report.add("prefetch.accounting", "prefetch_tokens_occupied " +
                                          std::to_string(prefetch_tokens_occupied_) +
                                          " != recomputed " + std::to_string(occupied));
  }
  check_write_markers(report);
  check_protect_once(report);
}

// [write_through.marker] A node's write_through_pending names a device->host write that is in
// flight: backup_node marks the node with its own id and files the write in pending_writes_; a
// split while the copy runs hands the mark to the new prefix above (RadixTree::split), so the
// marked nodes of write `id` are node `id` and the fragments cut off above it, one unbroken run
// up its path; finish_write_ack clears that run and drops the write. Recomputed from both sides:
// the marks the tree holds, counted per write, against the pending list and each write's run
// up from its node. A mark left after its ack, a mark of a write never issued, a pending write
// whose node lost its mark, or a mark away from its write's path is reported.
void HiCache::check_write_markers(SanityReport& report) const {
  std::map<NodeId, int64_t> marked;  // write id -> nodes carrying its mark
  tree_->for_each_node([&](const TreeNode& n) {
    if (!n.write_through_pending) return;
    const NodeId id = *n.write_through_pending;
    ++marked[id];
    if (pending_writes_.count(id) == 0) {
      report.add("write_through.marker",
                 "node carries the in-flight mark of write " + std::to_string(id) +
                     ", which is not pending (its ack was consumed, or it was never issued)",
                 n.id);
    }
  });
  for (const auto& [id, pending] : pending_writes_) {
    const TreeNode* node = tree_->find(id);
    if (node == nullptr) continue;  // inflight.locked reports it
    int64_t run = 0;                // the node and the fragments split off above it
    for (const TreeNode* n = node; !n->is_root() && n->write_through_pending == id; n = n->parent)
      ++run;
    const auto it = marked.find(id);
    const int64_t carried = it == marked.end() ? 0 : it->second;
    if (run == 0) {
      report.add("write_through.marker",
                 "pending write's node does not carry its in-flight mark (it carries " +
                     (node->write_through_pending
                          ? "write " + std::to_string(*node->write_through_pending) + "'s"
                          : std::string("none")) +
                     ")",
                 id);
    } else if (run != carried) {
      report.add("write_through.marker",
                 std::to_string(carried) + " node(s) carry the mark of pending write " +
                     std::to_string(id) + ", but only " + std::to_string(run) +
                     " are its node and the fragments split off above it",
                 id);
    }
  }
}

// [inflight.protect_once] Each live operation host-protects a node at most once, and releases
// what it protected once: a pending load its distinct source nodes (load_back builds the list
// from the evicted chain, the SWA window nodes not on it and the Mamba anchor, each once), a
// storage backup its one node (a node gets a backup when its write is acknowledged; a second
// write needs the host copy gone, which the backup's protection forbids, so no node has two
// backups queued or awaiting release at once). host_protection.owned compares each node's
// count with its owners, so a load that protects a node twice and releases it twice passes
// there; here it does not. Prefetches may share an anchor (each protects its own once).
void HiCache::check_protect_once(SanityReport& report) const {
  for (const auto& [id, pending] : pending_loads_) {
    std::set<NodeId> seen;
    for (NodeId p : pending.protected_nodes) {
      if (!seen.insert(p).second) {
        report.add("inflight.protect_once",
                   "pending load of node " + std::to_string(id) + " host-protects node " +
                       std::to_string(p) + " more than once",
                   p);
      }
    }
  }
  std::set<NodeId> backed;
  for (const PendingBackup& b : backups_) {
    if (!backed.insert(b.node).second) {
      report.add("inflight.protect_once", "two storage backups of one node are queued", b.node);
    }
  }
  for (NodeId id : finished_backups_) {
    if (!backed.insert(id).second) {
      report.add("inflight.protect_once",
                 "a finished storage backup's node has another backup queued or finished", id);
    }
  }
}

}  // namespace kvsim
