// RequestKV: one request's hold on the cache — the scheduler side of HiCache's protocol
// (SGLang's req.prefix_indices / last_node / cache_finished_req), shared by every driver.
//
//   admit():   match_prefix, lock the device anchor, load back what the host holds (when it
//              is worth it), and for Mamba copy the matched state into the request's own
//              slot (copy-on-write);
//   extend():  allocate slots for positions [size(), new_len) in every pool;
//   finish():  insert the KV into the tree, free what the tree did not adopt, unlock;
//   abort():   free the request's own slots and unlock, inserting nothing.
// The model forward (which writes the bytes) is the driver's: written_from() says where the
// request's own slots start.
//
// Invariants: kv().size() is a page multiple >= the token count served so far; positions
// below owned_from() hold tree slots and are never freed by the request; a request holds its
// lock from admit() to finish()/abort() and nothing after.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "core/cache/hi_cache.h"

namespace kvsim {

struct AdmitOutcome {
  int64_t device_hit_tokens = 0;  // served from device at match time
  int64_t host_hit_tokens = 0;    // loaded back from host
  bool mamba_hit = false;         // the state was copied from the tree
};

class RequestKV {
 public:
  RequestKV(HiCache& cache, Namespace ns);
  ~RequestKV();
  RequestKV(const RequestKV&) = delete;
  RequestKV& operator=(const RequestKV&) = delete;
  RequestKV(RequestKV&&) = default;

  // Returns nullopt when even a Mamba state slot cannot be had (nothing is then held).
  // With use_prefix_cache false (PD decode receiving KV from a prefill instance) nothing is
  // matched: every slot is the request's own.
  // start_load false queues the load-back without issuing it, as SGLang's scheduler does for
  // every request of a batch: the caller then issues the batch's loads with
  // HiCache::ready_to_load_host_cache() and waits (wait_for_load) before the forward reads
  // the prefix. load_back_quota is init_load_back's mem_quota: a load-back larger than it
  // (plus what its locked ancestors hold) is declined.
  std::optional<AdmitOutcome> admit(std::span<const Token> tokens, bool allow_load_back = true,
                                    bool use_prefix_cache = true, bool start_load = true,
                                    std::optional<int64_t> load_back_quota = std::nullopt);
  // False (and nothing allocated) when the pools cannot supply the slots.
  bool extend(size_t new_len);
  // chunked: a middle chunk's insert (AuxInsertValues::chunked); the request still ends here.
  void finish(std::span<const Token> tokens, bool chunked = false);
  void abort();
  // Forgets the request's hold without touching the cache: only for a cache that has already
  // failed an assertion (the simulator's teardown after a violation).
  void detach() { active_ = false; }

  bool active() const { return active_; }
  Namespace ns() const { return ns_; }
  const IndexVector& kv() const { return kv_; }
  const std::optional<IndexVector>& swa() const { return swa_; }
  std::optional<SlotIndex> mamba_state() const { return mamba_; }
  size_t owned_from() const { return owned_from_; }
  size_t cached_tokens() const { return owned_from_; }

 private:
  void release_own();
  bool grow(size_t new_len);

  // Result checks (read only; mutate.py leaves check_* bodies alone). What the request holds,
  // counted in each pool's request-held pages before and after a call.
  struct Held {
    int64_t device = 0;  // tokens
    int64_t swa = 0;     // pages
    int64_t mamba = 0;   // pages (one state each)
  };
  Held check_held() const;
  void check_admitted(const AdmitOutcome& out, size_t token_count, const TreeNode* device_match,
                      const TreeNode* anchor, bool loaded_back, std::optional<SlotIndex> own_state,
                      const Held& before) const;
  void check_extended(size_t new_len, size_t size_before, const Held& before, bool ok) const;
  // `own` is what the request held of its own before finish/abort, in the units of Held.
  Held check_own() const;
  void check_released(const Held& before, const Held& own, const char* what) const;

  HiCache& cache_;
  Namespace ns_;
  bool active_ = false;
  LockRecord lock_;
  IndexVector kv_{Tier::kDevice, {}};
  std::optional<IndexVector> swa_;
  std::optional<SlotIndex> mamba_;
  size_t owned_from_ = 0;
};

}  // namespace kvsim
