#include "core/cache/request_kv.h"

#include <algorithm>
#include <exception>

#include "core/common/assert.h"
#include "core/common/probe.h"

namespace kvsim {

RequestKV::RequestKV(HiCache& cache, Namespace ns) : cache_(cache), ns_(ns) {}

RequestKV::~RequestKV() {
  // While an assertion unwinds the stack the cache is already broken; do not assert again.
  if (std::uncaught_exceptions() > 0) return;
  KV_ASSERT(!active_, "request dropped while it still holds cache slots and a lock");
}

std::optional<AdmitOutcome> RequestKV::admit(std::span<const Token> tokens, bool allow_load_back,
                                             bool use_prefix_cache, bool start_load,
                                             std::optional<int64_t> load_back_quota) {
  KV_ASSERT(!active_, "admit twice");
  const Held held_before = check_held();
  const bool has_swa = cache_.side_pool(ComponentType::kSwa) != nullptr;
  const bool has_mamba = cache_.side_pool(ComponentType::kMamba) != nullptr;
  std::optional<SlotIndex> own_state;
  if (has_mamba) {
    own_state = cache_.alloc_mamba_state();
    if (!own_state) return std::nullopt;
  }
  AdmitOutcome out;
  if (!use_prefix_cache) {
    lock_ = LockRecord{};
    active_ = true;
    kv_ = IndexVector(Tier::kDevice, {});
    owned_from_ = 0;
    if (has_swa) swa_ = IndexVector(Tier::kDevice, {});
    mamba_ = own_state;
    check_admitted(out, tokens.size(), nullptr, nullptr, false, own_state, held_before);
    return out;
  }
  MatchResult m = cache_.match_prefix(ns_, tokens);
  TreeNode* anchor = m.last_device_node;
  bool loaded_back = false;
  size_t evicted_tokens = 0;
  int64_t below_device_tokens = 0;
  IndexVector loaded(Tier::kDevice, {});  // init_load_back's result: the FULL slots it loaded
  // The device match is the fallback if the load-back fails, and a load-back that makes room
  // evicts: hold the device anchor (all components) while it runs.
  lock_ = cache_.lock(*anchor);
  TreeNode* const load_at = m.best_match_node;  // a load-back anchors on the best match (seed 002)
  if (allow_load_back && load_at != m.last_device_node) {
    // The FULL KV a load-back brings in: the evicted bottom of the path to the match.
    for (const TreeNode* n = load_at; !n->is_root() && n->evicted(); n = n->parent)
      evicted_tokens += static_cast<size_t>(n->token_count());
    // ... and what it must bring for the side components: the SWA of the window ending at the
    // match that is not on device (whole nodes up to the window's length), and the match's
    // Mamba state when it is not on device.
    int64_t swa_missing = 0;
    if (has_swa) {
      int64_t covered = 0;
      for (const TreeNode* n = load_at;
           !n->is_root() && covered < cache_.options().swa_window_tokens; n = n->parent) {
        if (!n->has_device(ComponentType::kSwa)) swa_missing += n->token_count();
        covered += n->token_count();
      }
    }
    const bool mamba_missing =
        has_mamba && !load_at->is_root() && !load_at->has_device(ComponentType::kMamba);
    // The host hit the admit reports: the path from the device match down to the load's anchor.
    for (const TreeNode* n = load_at; n != m.last_device_node && !n->is_root(); n = n->parent)
      below_device_tokens += n->token_count();
    LoadBackResult lb = cache_.init_load_back(*load_at, load_back_quota);
    KV_PROBE_IF(!lb.loaded, req_load_back_declined);
    if (lb.loaded) {
      // [load_back.result] the side components' part of what init_load_back reports.
      KV_ASSERT(lb.swa_loaded_tokens == swa_missing && lb.mamba_loaded == mamba_missing,
                "load_back.result: init_load_back reports " + std::to_string(lb.swa_loaded_tokens) +
                    " SWA token(s) and Mamba " + (lb.mamba_loaded ? "loaded" : "not loaded") +
                    "; the window lacked " + std::to_string(swa_missing) +
                    " and the match's state was " +
                    (mamba_missing ? "not on device" : "on device"));
      loaded_back = true;
      loaded = std::move(lb.device_indices);
      cache_.unlock(lock_);
      anchor = lb.last_node;
      lock_ = cache_.lock(*anchor);
      // Whatever reads the loaded prefix on the compute stream (the forward, the Mamba
      // copy-on-write below) must wait for the load to land. Deferred, the caller issues it
      // with the batch; the copy-on-write below issues it early if it reads the anchor.
      if (start_load) cache_.wait_for_load(cache_.ready_to_load_host_cache());
      out.host_hit_tokens = m.host_hit_length;
    }
  }
  active_ = true;
  // The tree's slots for the prefix (root→anchor): the match already returned them unless a
  // load-back moved the anchor, in which case they are read off the anchor's path.
  if (anchor == m.last_device_node) {
    kv_ = std::move(m.device_indices);
    int64_t path_tokens = 0;  // O(depth), no copy: the match and the anchor's path agree
    for (const TreeNode* n = anchor; !n->is_root(); n = n->parent)
      path_tokens += n->token_count();
    KV_ASSERT(path_tokens == static_cast<int64_t>(kv_.size()),
              "match indices and the anchor's path disagree");
  } else {
    kv_ = IndexVector(Tier::kDevice, {});
    for (TreeNode* n : RadixTree::path_to(*anchor))
      kv_.append(*n->full().value);
  }
  owned_from_ = kv_.size();
  out.device_hit_tokens = static_cast<int64_t>(owned_from_) - out.host_hit_tokens;
  if (loaded_back) {
    // [load_back.result] what init_load_back hands its caller is the FULL KV it loaded: the
    // new slots of the path's evicted bottom, in order (a hybrid load may bring only side-pool
    // state for nodes whose FULL KV stayed on device: those are not in it).
    KV_ASSERT(loaded.size() == evicted_tokens && evicted_tokens <= kv_.size() &&
                  loaded == kv_.slice(kv_.size() - evicted_tokens, kv_.size()) &&
                  out.host_hit_tokens == below_device_tokens,
              "load_back.result: init_load_back returned " + std::to_string(loaded.size()) +
                  " device slots for a load of " + std::to_string(evicted_tokens) +
                  " evicted tokens, or other slots than the path's, or the admit reports " +
                  std::to_string(out.host_hit_tokens) + " host-hit tokens for " +
                  std::to_string(below_device_tokens) + " below the device match");
  }
  if (has_swa) {
    swa_ = cache_.path_swa_slots(*anchor);
    KV_VERIFY(cache_.check_path_swa_slots(*anchor, *swa_).empty(),
              cache_.check_path_swa_slots(*anchor, *swa_));
  }
  if (has_mamba) {
    mamba_ = own_state;
    if (!anchor->is_root() && anchor->has_device(ComponentType::kMamba)) {
      // The state may have been loaded back by another request's load-back still in flight
      // (found by the HybridSelectiveWithStorage property: an unordered read on compute).
      cache_.wait_for_loads_of(*anchor);
      cache_.copy_mamba_state((*anchor->component(ComponentType::kMamba).value)[0], *mamba_);
      out.mamba_hit = true;
    }
  }
  check_admitted(out, tokens.size(), m.last_device_node, anchor, loaded_back, own_state,
                 held_before);
  return out;
}

bool RequestKV::extend(size_t new_len) {
  KV_ASSERT(active_, "extend of a request that is not admitted");
  const size_t size_before = kv_.size();
  const Held before = check_held();
  const bool ok = grow(new_len);
  check_extended(new_len, size_before, before, ok);
  return ok;
}

bool RequestKV::grow(size_t new_len) {
  const auto page = static_cast<size_t>(cache_.options().page_size);
  if (new_len <= kv_.size()) return true;
  const size_t need = (new_len - kv_.size() + page - 1) / page * page;
  std::optional<IndexVector> kv = cache_.alloc_device(static_cast<int64_t>(need));
  if (!kv) return false;
  if (swa_) {
    std::optional<IndexVector> swa = cache_.alloc_swa(static_cast<int64_t>(need));
    if (!swa) {
      KV_PROBE(req_extend_swa_fails);
      cache_.free_device(*kv);
      return false;
    }
    swa_->append(*swa);
  }
  kv_.append(*kv);
  return true;
}

void RequestKV::finish(std::span<const Token> tokens, bool chunked) {
  KV_ASSERT(active_, "finish of a request that is not admitted");
  KV_ASSERT(kv_.size() >= tokens.size(), "finish before the KV of every token was allocated");
  const Held before = check_held();
  const Held own = check_own();
  AuxInsertValues aux{.swa = swa_, .mamba = mamba_, .owned_from = owned_from_, .chunked = chunked};
  InsertResult ins = cache_.insert(ns_, tokens, kv_, aux);
  KV_PROBE_IF(static_cast<size_t>(ins.prefix_len) > owned_from_, req_finish_duplicate);
  // Full-attention slots the tree did not adopt: duplicates and the unaligned tail.
  const auto page = static_cast<size_t>(cache_.options().page_size);
  const size_t aligned = tokens.size() / page * page;
  std::vector<SlotIndex> mine;
  for (size_t i = owned_from_; i < static_cast<size_t>(ins.prefix_len); ++i)
    mine.push_back(kv_[i]);
  for (size_t i = std::max(aligned, owned_from_); i < kv_.size(); ++i)
    mine.push_back(kv_[i]);
  if (!mine.empty()) cache_.free_device(IndexVector(Tier::kDevice, std::move(mine)));
  cache_.unlock(lock_);
  lock_ = LockRecord{};  // released: a later admit of this request starts from no lock
  swa_.reset();
  mamba_.reset();
  kv_ = IndexVector(Tier::kDevice, {});
  active_ = false;
  check_released(before, own, "finish");
}

void RequestKV::abort() {
  KV_ASSERT(active_, "abort of a request that is not admitted");
  const Held before = check_held();
  const Held own = check_own();
  release_own();
  cache_.unlock(lock_);
  lock_ = LockRecord{};
  active_ = false;
  check_released(before, own, "abort");
}

void RequestKV::release_own() {
  if (kv_.size() > owned_from_) cache_.free_device(kv_.slice(owned_from_, kv_.size()));
  if (swa_ && swa_->size() > owned_from_) {
    std::vector<SlotIndex> own;
    for (size_t i = owned_from_; i < swa_->size(); ++i) {
      if ((*swa_)[i] != 0) own.push_back((*swa_)[i]);
    }
    if (!own.empty()) cache_.free_swa(IndexVector(Tier::kDevice, std::move(own)));
  }
  if (mamba_) cache_.free_mamba_state(*mamba_);
  swa_.reset();
  mamba_.reset();
  kv_ = IndexVector(Tier::kDevice, {});
}

// --- Result checks: each value a call returns or leaves behind, against a count or a walk that
// does not go through the code that produced it (read only: no lock, no access time, no probe).

RequestKV::Held RequestKV::check_held() const {
  Held h;
  h.device = cache_.request_held_tokens();
  if (const SidePool* swa = cache_.side_pool(ComponentType::kSwa)) {
    h.swa = swa->request_slots().held_pages();
  }
  if (const SidePool* mamba = cache_.side_pool(ComponentType::kMamba)) {
    h.mamba = mamba->request_slots().held_pages();
  }
  return h;
}

RequestKV::Held RequestKV::check_own() const {
  Held own;
  own.device = static_cast<int64_t>(kv_.size()) - static_cast<int64_t>(owned_from_);
  if (swa_) {
    const SidePool* pool = cache_.side_pool(ComponentType::kSwa);
    KV_ASSERT(pool != nullptr, "request.own: SWA slots without an SWA pool");
    int64_t slots = 0;
    for (size_t i = owned_from_; i < swa_->size(); ++i)
      slots += (*swa_)[i] != 0 ? 1 : 0;
    const int64_t page = pool->device_slots().page_size();
    KV_ASSERT(slots % page == 0, "request.own: " + std::to_string(slots) +
                                     " own SWA slots are not whole pages of " +
                                     std::to_string(page));
    own.swa = slots / page;
  }
  own.mamba = mamba_ ? 1 : 0;
  return own;
}

void RequestKV::check_admitted(const AdmitOutcome& out, size_t token_count,
                               const TreeNode* device_match, const TreeNode* anchor,
                               bool loaded_back, std::optional<SlotIndex> own_state,
                               const Held& before) const {
  const auto page = static_cast<size_t>(cache_.options().page_size);
  const bool has_swa = cache_.side_pool(ComponentType::kSwa) != nullptr;
  const bool has_mamba = cache_.side_pool(ComponentType::kMamba) != nullptr;
  // [admit.result] The request starts holding exactly the tree's prefix, whole pages of it.
  KV_ASSERT(
      active_ && kv_.size() == owned_from_ && owned_from_ % page == 0 && owned_from_ <= token_count,
      "admit.result: an admitted request holds " + std::to_string(kv_.size()) +
          " slot(s) and owns from " + std::to_string(owned_from_) + " (page " +
          std::to_string(page) + ", " + std::to_string(token_count) + " tokens)");
  // The device hit is the device match's path, counted node by node; a host hit needs a load.
  int64_t device_path = 0;
  for (const TreeNode* n = device_match; n != nullptr && !n->is_root(); n = n->parent)
    device_path += n->token_count();
  KV_ASSERT(out.device_hit_tokens == device_path && (loaded_back || out.host_hit_tokens == 0) &&
                out.device_hit_tokens + out.host_hit_tokens == static_cast<int64_t>(owned_from_),
            "admit.result: device hit " + std::to_string(out.device_hit_tokens) + ", host hit " +
                std::to_string(out.host_hit_tokens) + " for a device match of " +
                std::to_string(device_path) + " token(s), a prefix of " +
                std::to_string(owned_from_) + (loaded_back ? ", loaded back" : ", no load-back"));
  // Admit hands the request no device slot of its own (the load-back's are the tree's).
  const Held now = check_held();
  KV_ASSERT(now.device == before.device, "admit.result: request-held device tokens went from " +
                                             std::to_string(before.device) + " to " +
                                             std::to_string(now.device) + " in an admit");
  KV_ASSERT(swa_.has_value() == has_swa && (!swa_ || swa_->size() == kv_.size()),
            "admit.result: the SWA slots do not cover the prefix one per token");
  KV_ASSERT(mamba_.has_value() == has_mamba && mamba_ == own_state,
            "admit.result: the request's Mamba state is not the slot allocated for it");
  const bool state_on_device = has_mamba && anchor != nullptr && !anchor->is_root() &&
                               anchor->has_device(ComponentType::kMamba);
  KV_ASSERT(out.mamba_hit == state_on_device, std::string("admit.result: mamba_hit is ") +
                                                  (out.mamba_hit ? "true" : "false") +
                                                  " but the anchor's Mamba state is " +
                                                  (state_on_device ? "" : "not ") + "on device");
  if (anchor == nullptr) {
    KV_ASSERT(lock_.anchor == 0 && std::none_of(lock_.start.begin(), lock_.start.end(),
                                                [](const auto& s) { return s.has_value(); }),
              "admit.result: an admit without the prefix cache holds a lock record");
    return;
  }
  KV_ASSERT(lock_.anchor == anchor->id, "admit.result: the lock is anchored at node " +
                                            std::to_string(lock_.anchor) + ", not at node " +
                                            std::to_string(anchor->id));
  if constexpr (kVerify) {  // kv() holds the tree's slots, node by node up the anchor's path
    size_t end = kv_.size();
    for (const TreeNode* n = anchor; !n->is_root(); n = n->parent) {
      const auto len = static_cast<size_t>(n->token_count());
      KV_VERIFY(n->full().value && n->full().value->size() == len && len <= end &&
                    kv_.slice(end - len, end) == *n->full().value,
                "admit.result: kv() differs from node " + std::to_string(n->id) +
                    "'s device slots at positions below " + std::to_string(end));
      end -= len;
    }
    KV_VERIFY(end == 0, "admit.result: kv() is longer than the anchor's path");
  }
}

void RequestKV::check_extended(size_t new_len, size_t size_before, const Held& before,
                               bool ok) const {
  const auto page = static_cast<size_t>(cache_.options().page_size);
  const Held now = check_held();
  const size_t target = std::max(size_before, (new_len + page - 1) / page * page);
  KV_ASSERT(ok || new_len > size_before, "extend.result: an extend within the held slots failed");
  KV_ASSERT(!swa_ || swa_->size() == kv_.size(),
            "extend.result: " + std::to_string(kv_.size()) + " KV slot(s) but " +
                std::to_string(swa_ ? swa_->size() : 0) + " SWA slot(s)");
  const size_t grown = ok ? target - size_before : 0;
  const SidePool* swa_pool = cache_.side_pool(ComponentType::kSwa);
  const int64_t swa_pages =
      swa_ && swa_pool ? static_cast<int64_t>(grown) / swa_pool->device_slots().page_size() : 0;
  KV_ASSERT(kv_.size() == size_before + grown &&
                now.device - before.device == static_cast<int64_t>(grown) &&
                now.swa - before.swa == swa_pages && now.mamba == before.mamba,
            "extend.result: extend to " + std::to_string(new_len) +
                (ok ? " succeeded" : " failed") + " from " + std::to_string(size_before) +
                " slot(s), leaving " + std::to_string(kv_.size()) +
                "; request-held device tokens " + std::to_string(before.device) + " -> " +
                std::to_string(now.device) + ", SWA pages " + std::to_string(before.swa) + " -> " +
                std::to_string(now.swa));
  for (size_t p = size_before; p < kv_.size(); p += page) {  // the new slots: whole pages
    for (size_t i = 0; i < page; ++i) {
      KV_ASSERT(kv_[p] > 0 && kv_[p] % static_cast<SlotIndex>(page) == 0 &&
                    kv_[p + i] == kv_[p] + static_cast<SlotIndex>(i),
                "extend.result: new slot " + std::to_string(kv_[p + i]) + " at position " +
                    std::to_string(p + i) + " is not in a whole page");
    }
  }
}

void RequestKV::check_released(const Held& before, const Held& own, const char* what) const {
  const Held now = check_held();
  // [request.release] Every slot the request owned left its hold: adopted by the tree or freed.
  KV_ASSERT(before.device - now.device == own.device && before.swa - now.swa == own.swa &&
                before.mamba - now.mamba == own.mamba,
            std::string("request.release: ") + what + " of a request owning " +
                std::to_string(own.device) + " device token(s), " + std::to_string(own.swa) +
                " SWA page(s), " + std::to_string(own.mamba) + " Mamba state(s) released device " +
                std::to_string(before.device - now.device) + ", SWA " +
                std::to_string(before.swa - now.swa) + ", Mamba " +
                std::to_string(before.mamba - now.mamba));
  KV_ASSERT(!active_ && kv_.empty() && !swa_ && !mamba_ && lock_.anchor == 0 &&
                std::none_of(lock_.start.begin(), lock_.start.end(),
                             [](const auto& s) { return s.has_value(); }),
            std::string("request.release: after ") + what +
                " the request still holds slots, a state or a lock record");
}

}  // namespace kvsim
