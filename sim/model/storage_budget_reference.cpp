#include "sim/model/storage_budget_reference.h"

namespace kvsim::sim {

StorageBudgetReference::SetPlan StorageBudgetReference::plan_set(const PageDigest& key,
                                                                 uint64_t payload_bytes) const {
  SetPlan plan;
  const uint64_t cost = payload_bytes + overhead_bytes_;
  if (capacity_bytes_ != 0 && cost > capacity_bytes_) {
    plan.refused = true;
    return plan;
  }
  // A page under this key that the store no longer counts as stored (a torn file) is replaced:
  // its bytes do not count against the budget.
  uint64_t bytes = bytes_;
  uint64_t pages = pages_.size();
  if (auto it = pages_.find(key); it != pages_.end()) {
    bytes -= it->second.cost;
    --pages;
  }
  for (auto it = by_use_.begin(); it != by_use_.end(); ++it) {
    const bool over_bytes = capacity_bytes_ != 0 && bytes + cost > capacity_bytes_;
    const bool over_pages = capacity_pages_ != 0 && pages >= capacity_pages_;
    if (!over_bytes && !over_pages) break;
    if (it->second == key) continue;
    plan.victims.push_back(it->second);
    bytes -= pages_.at(it->second).cost;
    --pages;
  }
  return plan;
}

void StorageBudgetReference::apply_set(const SetPlan& plan, const PageDigest& key,
                                       uint64_t payload_bytes, bool stored) {
  if (plan.refused) return;
  for (const PageDigest& victim : plan.victims)
    forget(victim);
  forget(key);
  if (!stored) return;
  const Page page{payload_bytes + overhead_bytes_, ++clock_};
  pages_[key] = page;
  by_use_[page.last_use] = key;
  bytes_ += page.cost;
}

void StorageBudgetReference::hit(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;  // not a page this run stored
  by_use_.erase(it->second.last_use);
  it->second.last_use = ++clock_;
  by_use_[it->second.last_use] = key;
}

void StorageBudgetReference::forget(const PageDigest& key) {
  auto it = pages_.find(key);
  if (it == pages_.end()) return;
  by_use_.erase(it->second.last_use);
  bytes_ -= it->second.cost;
  pages_.erase(it);
}

namespace {

std::string short_key(const PageDigest& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < 6; ++i) {
    s += kHex[static_cast<uint8_t>(key[i]) >> 4];
    s += kHex[static_cast<uint8_t>(key[i]) & 15];
  }
  return s + "...";
}

}  // namespace

void BudgetOrderCheck::diverge(std::string what) {
  if (!broken_) broken_ = std::move(what);
}

void BudgetOrderCheck::before_set(const PageDigest& key, uint64_t payload_bytes) {
  held_ = store_.exists(key);
  plan_ = held_ ? StorageBudgetReference::SetPlan{} : reference_.plan_set(key, payload_bytes);
  evictions_before_ = evictions_();
}

void BudgetOrderCheck::after_set(const PageDigest& key, uint64_t payload_bytes,
                                 StorageStatus status) {
  const uint64_t evicted = evictions_() - evictions_before_;
  if (held_) {
    if (!reference_.holds(key)) {
      diverge("set(" + short_key(key) +
              "): the store still holds a page the budget's "
              "reference evicted");
    } else if (evicted != 0) {
      diverge("set(" + short_key(key) + ") of a page already stored evicted " +
              std::to_string(evicted) + " page(s)");
    }
    return;
  }
  if (plan_.refused && status == StorageStatus::kOk) {
    diverge("set(" + short_key(key) + ") of " + std::to_string(payload_bytes) +
            " bytes was accepted, but the page alone exceeds the budget");
  } else if (!plan_.refused && status != StorageStatus::kOk && only_budget_refuses_) {
    diverge("set(" + short_key(key) + ") of " + std::to_string(payload_bytes) + " bytes returned " +
            std::string(to_string(status)) + ", but the page fits the budget (" +
            std::to_string(reference_.bytes()) + " bytes held before, victims " +
            std::to_string(plan_.victims.size()) + ")");
  } else if (evicted != plan_.victims.size()) {
    diverge("set(" + short_key(key) + ") evicted " + std::to_string(evicted) +
            " page(s); the least-recently-used reference evicts " +
            std::to_string(plan_.victims.size()) + " (" + std::to_string(reference_.page_count()) +
            " page(s), " + std::to_string(reference_.bytes()) + " bytes held before)");
  } else {
    for (size_t i = 0; i < plan_.victims.size(); ++i) {
      if (store_.exists(plan_.victims[i])) {
        diverge("set(" + short_key(key) + ") kept " + short_key(plan_.victims[i]) + ", victim " +
                std::to_string(i + 1) + " of " + std::to_string(plan_.victims.size()) +
                " of the least-recently-used reference, and evicted another page");
        break;
      }
    }
    if (status == StorageStatus::kOk && !store_.exists(key)) {
      diverge("set(" + short_key(key) + ") returned ok but the page is not stored");
    }
  }
  reference_.apply_set(plan_, key, payload_bytes, status == StorageStatus::kOk);
}

void BudgetOrderCheck::after_get(const PageDigest& key, StorageStatus status) {
  if (status == StorageStatus::kOk) reference_.hit(key);
  if (status == StorageStatus::kMiss) reference_.forget(key);
}

}  // namespace kvsim::sim
