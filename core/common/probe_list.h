// The declaration of every code probe (see core/common/probe.h): one line each,
//   X(name, file, meaning, expected_unreached)
// where expected_unreached is "" or, temporarily, why no current sweep reaches the probe.
// docs/probes.md is generated from this list (`kvsim probes --markdown`); a test keeps the two
// equal. Adding a probe: add its line here, put KV_PROBE(name) on the path, regenerate the doc.
#pragma once

// clang-format off
#define KVSIM_PROBE_LIST(X) \
  /* core/tree: the radix tree */ \
  X(tree_divergence_mid_page, "core/tree/radix_tree.cpp", "a key diverges from a cached key inside a page (page_size > 1): the match is rounded down to the page", "") \
  X(tree_split_locked, "core/tree/radix_tree.cpp", "a node is split while a request or a transfer holds a lock on it", "") \
  X(tree_split_pending_write, "core/tree/radix_tree.cpp", "a node is split while its write-through to host is in flight", "") \
  X(tree_split_host_copy, "core/tree/radix_tree.cpp", "a node with a host copy is split (both halves keep a slice of it)", "") \
  X(tree_split_evicted, "core/tree/radix_tree.cpp", "a host-only (device-evicted) node is split", "") \
  X(tree_split_host_protected, "core/tree/radix_tree.cpp", "a node is split while a load, backup or prefetch protects its host copy", "") \
  X(tree_insert_recompute_evicted, "core/tree/radix_tree.cpp", "insert finds an evicted node on its path and gives it the request's recomputed slots", "") \
  X(tree_insert_diverge_at_grandchild, "core/tree/radix_tree_insert.cpp", "an insert's walk diverges inside a node (whole pages matched, fewer than the node holds) and that node has a child whose first page is the insert's diverging page", "") \
  X(tree_insert_host_refused, "core/tree/radix_tree.cpp", "a host insert (prefetch) stops at a node with no host copy", "") \
  X(tree_ns_shared_tokens, "core/tree/radix_tree.cpp", "two namespaces hold the same first page under the root", "") \
  X(full_lock_skips_evicted, "core/tree/full_component.cpp", "a lock anchored on an evicted node starts at its first device ancestor", "") \
  X(swa_lock_stops_at_tombstone, "core/tree/swa_component.cpp", "an SWA window lock stops at a node whose SWA value was tombstoned", "") \
  X(swa_split_window_locked, "core/tree/swa_component.cpp", "a node whose SWA value is window-locked is split", "") \
  X(mamba_split_state_node, "core/tree/mamba_component.cpp", "a node holding a Mamba state is split (the upper half starts as a tombstone)", "") \
  /* core/tiers: the cache controller */ \
  X(ctl_write_no_host, "core/tiers/cache_controller.cpp", "a write-through finds no host slots", "") \
  X(ctl_load_no_device, "core/tiers/cache_controller.cpp", "a load-back finds no device slots", "") \
  X(ctl_several_write_acks, "core/tiers/cache_controller.cpp", "one poll returns several finished write-throughs", "") \
  X(ctl_several_load_acks, "core/tiers/cache_controller.cpp", "one poll returns several finished loads", "") \
  X(ctl_loads_merged, "core/tiers/cache_controller.cpp", "several queued load-backs are issued as one batch with one ack", "") \
  X(ctl_side_transfers_merged, "core/tiers/cache_controller.cpp", "two queued loads carry the same side pool and their transfers are merged", "") \
  X(ctl_aux_only_load, "core/tiers/cache_controller.cpp", "a load batch carries side-pool data only (no full-attention KV)", "") \
  /* core/tiers: the storage backends' budgets */ \
  X(store_memory_budget_evicts, "core/tiers/memory_storage.cpp", "a memory store evicts its least recently used page to fit a new one in its budget", "") \
  X(store_file_budget_evicts, "core/tiers/file_storage.cpp", "a file store evicts its least recently used page to fit a new one in its byte budget", "") \
  /* core/cache: HiCache */ \
  X(cache_alloc_host_evicts, "core/cache/hi_cache.cpp", "a host allocation evicts host-only leaves to make room", "") \
  X(cache_alloc_host_fails, "core/cache/hi_cache.cpp", "a host allocation fails even after host eviction", "") \
  X(cache_backup_parent_not_backed, "core/cache/hi_cache.cpp", "a write-through is skipped because the parent has no host copy yet", "") \
  X(cache_backup_evicts_host, "core/cache/hi_cache.cpp", "a write-through evicts host leaves to find room", "") \
  X(cache_backup_evicts_sglang_amount, "core/cache/hi_cache.cpp", "that eviction takes the node's whole length (SGLang's amount, cache.sglang_eviction_amounts)", "") \
  X(cache_backup_fails, "core/cache/hi_cache.cpp", "a write-through gives up: no host room even after eviction", "") \
  X(cache_backup_aux_rollback, "core/cache/hi_cache.cpp", "a failed write-through gives back side-pool host slots it had taken", "") \
  X(cache_evict_write_back, "core/cache/hi_cache.cpp", "device eviction forces a write-back of the victim before demoting it", "") \
  X(cache_evict_write_back_no_room, "core/cache/hi_cache.cpp", "a write-back victim is dropped because the host has no room", "") \
  X(cache_evict_short, "core/cache/hi_cache.cpp", "device eviction runs out of victims before freeing what was asked", "") \
  X(cache_host_evict_while_protected, "core/cache/hi_cache.cpp", "host eviction runs while a load, backup or prefetch holds host protections", "") \
  X(cache_host_evict_short, "core/cache/hi_cache.cpp", "host eviction runs out of victims before freeing what was asked", "") \
  X(cache_write_ack_fragments, "core/cache/hi_cache.cpp", "a write ack publishes fragments split off its node while the copy ran", "") \
  X(lb_below_threshold, "core/cache/hi_cache_load_back.cpp", "a load-back is declined: shorter than load_back_threshold_tokens", "") \
  X(lb_over_quota, "core/cache/hi_cache_load_back.cpp", "a load-back is declined: larger than the memory quota", "") \
  X(lb_swa_window, "core/cache/hi_cache_load_back.cpp", "a load-back brings SWA window values back to the device", "") \
  X(lb_mamba_only, "core/cache/hi_cache_load_back.cpp", "a load-back brings only a Mamba state (the KV prefix is on device)", "") \
  X(lb_side_alloc_fails, "core/cache/hi_cache_load_back.cpp", "a load-back cannot pre-allocate its SWA or Mamba device slots", "") \
  X(lb_evicts_to_fit, "core/cache/hi_cache_load_back.cpp", "a load-back evicts device leaves to make room", "") \
  X(lb_evicts_sglang_amount, "core/cache/hi_cache_load_back.cpp", "that eviction takes the load's whole length (SGLang's amount, cache.sglang_eviction_amounts)", "") \
  X(lb_fails_after_evicting, "core/cache/hi_cache_load_back.cpp", "a load-back fails even after evicting, and rolls back", "") \
  X(lb_read_issues_queued_load, "core/cache/hi_cache_load_back.cpp", "a read of a node whose load is still queued issues the queue first", "") \
  X(aux_evict_device_leaf, "core/cache/hi_cache_side_pools.cpp", "side-pool eviction evicts a whole device leaf", "") \
  X(aux_tombstone, "core/cache/hi_cache_side_pools.cpp", "side-pool eviction tombstones a node's SWA or Mamba value, keeping its KV", "") \
  X(aux_host_evicts_for_side, "core/cache/hi_cache_side_pools.cpp", "a side-pool host allocation evicts host leaves", "") \
  X(aux_backup_skipped, "core/cache/hi_cache_side_pools.cpp", "a write-through backs up the KV without its side-pool data (no side host room)", "") \
  X(st_backup_multi_batch, "core/cache/hi_cache_storage.cpp", "a storage backup takes more than one batch step", "") \
  X(st_backup_set_fails, "core/cache/hi_cache_storage.cpp", "a storage write fails and stops its backup", "") \
  X(st_prefetch_rate_limited, "core/cache/hi_cache_storage.cpp", "a prefetch is refused: prefetch capacity is in use", "") \
  X(st_query_revoked, "core/cache/hi_cache_storage.cpp", "a prefetch is revoked: storage holds less than the threshold", "") \
  X(st_query_partial_hit, "core/cache/hi_cache_storage.cpp", "storage holds a prefix of the prefetch only", "") \
  X(st_query_hit_namespace, "core/cache/hi_cache_storage.cpp", "storage holds pages of a prefetch in a namespace other than the default (hashes seeded by the namespace)", "") \
  X(st_prefetch_shrunk, "core/cache/hi_cache_storage.cpp", "a prefetch is shrunk to fit the free host slots", "") \
  X(st_prefetch_no_host, "core/cache/hi_cache_storage.cpp", "a prefetch is revoked: no host room worth a prefetch", "") \
  X(st_read_fails_mid_prefetch, "core/cache/hi_cache_storage.cpp", "a storage read fails after part of the prefetch was read", "") \
  X(st_read_miss_after_hit, "core/cache/hi_cache_storage.cpp", "a page the hit query found is gone when read (evicted by another writer)", "") \
  X(st_read_io_error, "core/cache/hi_cache_storage.cpp", "a storage read fails with an I/O error (the page is kept)", "") \
  X(st_read_corrupt_removed, "core/cache/hi_cache_storage.cpp", "a page read back damaged or of the wrong size is removed from storage", "") \
  X(st_prefetch_timeout, "core/cache/hi_cache_storage.cpp", "a prefetch is ended by its timeout before completing", "") \
  X(st_prefetch_partial_finish, "core/cache/hi_cache_storage.cpp", "a prefetch finishes with fewer tokens than storage held", "") \
  X(st_prefetch_revoked_early, "core/cache/hi_cache_storage.cpp", "a prefetch ends before host memory was committed", "") \
  X(st_finish_overlap, "core/cache/hi_cache_storage.cpp", "a finished prefetch finds part of its pages already in the tree", "") \
  X(st_finish_refused, "core/cache/hi_cache_storage.cpp", "a finished prefetch cannot hang its pages under a node without a host copy", "") \
  X(st_abort_during_prefetch, "core/cache/hi_cache_storage.cpp", "a request is aborted while its prefetch runs", "") \
  X(req_load_back_declined, "core/cache/request_kv.cpp", "admit asked for a load-back and got none: it uses the device match", "") \
  X(req_extend_swa_fails, "core/cache/request_kv.cpp", "extend got KV slots but no SWA slots, and gives the KV slots back", "") \
  X(req_finish_duplicate, "core/cache/request_kv.cpp", "finish finds part of its tokens inserted by another request meanwhile", "")
// clang-format on
