// StorageBudgetReference: a plain reference model of which pages a budgeted store evicts, and
// in what order (invariant storage.budget_order, docs/invariants.md). The contract it models is
// the one MemoryStorage and FileStorage state (core/tiers/memory_storage.h, file_storage.h):
//  - a page costs its payload bytes plus a fixed per-page overhead (a file page's header);
//  - a set() of a page the store already holds stores nothing and is not a use;
//  - a set() of a page costing more than the budget alone is refused, nothing evicted;
//  - otherwise the least recently used pages go, oldest first, until the new one fits (bytes
//    within the byte budget, and below the page budget);
//  - recency is a logical clock that advances on a set() that stores and a get() that hits;
//    exists() and a failed get() are not uses.
// It is kept apart from the stores' own bookkeeping: a list ordered by last use, nothing else.
// FaultyStorage feeds it the inner store's calls and results and compares its predicted
// victims with what the store did (sim/model/storage_faults.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tiers/storage_backend.h"

namespace kvsim::sim {

class StorageBudgetReference {
 public:
  // 0 = unlimited, as for the stores.
  StorageBudgetReference(uint64_t capacity_bytes, uint64_t capacity_pages, uint64_t overhead_bytes)
      : capacity_bytes_(capacity_bytes),
        capacity_pages_(capacity_pages),
        overhead_bytes_(overhead_bytes) {}

  struct SetPlan {
    bool refused = false;             // larger than the budget on its own
    std::vector<PageDigest> victims;  // least recently used first
  };
  // What a set() of a page that is not stored (held = false) must do. Pure: nothing changes
  // until apply_set.
  SetPlan plan_set(const PageDigest& key, uint64_t payload_bytes) const;
  // The set() happened: the planned victims are gone; the page is stored (a use) if `stored`.
  void apply_set(const SetPlan& plan, const PageDigest& key, uint64_t payload_bytes, bool stored);
  void hit(const PageDigest& key);     // a get() that returned the page
  void forget(const PageDigest& key);  // remove(), or a get() that found nothing
  bool holds(const PageDigest& key) const { return pages_.count(key) != 0; }
  size_t page_count() const { return pages_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Page {
    uint64_t cost = 0;
    uint64_t last_use = 0;
  };
  uint64_t capacity_bytes_, capacity_pages_, overhead_bytes_;
  uint64_t bytes_ = 0;
  uint64_t clock_ = 0;
  std::map<PageDigest, Page> pages_;
  std::map<uint64_t, PageDigest> by_use_;  // last use → page, oldest first
};

// The comparison, call by call, of a store under a budget with the reference: fed the inner
// store's calls and results, it checks after each set() that the store evicted exactly the
// reference's victims (its eviction counter moved by their number, none of them is still
// there) and stored the page unless the reference refuses it; on a store whose budget is the
// only reason it refuses a set (`only_budget_refuses`: a memory store; a file store also
// fails on the OS's errors), a page the reference accepts must be stored, too. Only
// meaningful on a store that started empty (the reference knows every page). The first
// divergence is kept.
class BudgetOrderCheck {
 public:
  // `evictions`: the store's count of pages dropped for its budget.
  BudgetOrderCheck(StorageBackend& store, StorageBudgetReference reference,
                   std::function<uint64_t()> evictions, bool only_budget_refuses)
      : store_(store),
        reference_(std::move(reference)),
        evictions_(std::move(evictions)),
        only_budget_refuses_(only_budget_refuses) {}
  // Around the store's set(): `before_set` must see the store as the set() will.
  void before_set(const PageDigest& key, uint64_t payload_bytes);
  void after_set(const PageDigest& key, uint64_t payload_bytes, StorageStatus status);
  void after_get(const PageDigest& key, StorageStatus status);  // the store's own answer
  void removed(const PageDigest& key) { reference_.forget(key); }
  const std::optional<std::string>& broken() const { return broken_; }
  const StorageBudgetReference& reference() const { return reference_; }

 private:
  void diverge(std::string what);
  StorageBackend& store_;
  StorageBudgetReference reference_;
  std::function<uint64_t()> evictions_;
  bool only_budget_refuses_ = false;
  bool held_ = false;  // the page was stored before this set(): a deduplicated set
  StorageBudgetReference::SetPlan plan_;
  uint64_t evictions_before_ = 0;
  std::optional<std::string> broken_;
};

}  // namespace kvsim::sim
