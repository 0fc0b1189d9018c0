// MetadataBuffers: PD disaggregation's per-request metadata slots (SGLang's
// disaggregation/utils.py MetadataBuffers), indexed by req.metadata_buffer_index.
//
// Prefill writes a request's first output token, cached-token counts, logprob, top-k ids,
// hidden state, sparse top-k indices and bootstrap room into its slot (set_buf); decode reads
// them (get_buf) — for a retracted request possibly much later, after its slot was freed and
// handed to another request. free() clears every field, bootstrap_room included (SGLang #27374:
// a stale room leaked into the slot's next owner).
//
// Each slot's row is refcounted, as the tensors SGLang slices share their storage: get_buf
// hands out a snapshot the request keeps, and it must be a fresh clone of the row, never the
// row itself. Seed 003 handed out views (slices) and resumed requests read the next owner's
// data through them. Rows are sized at construction (capacities reserved); nothing is
// allocated after it except the snapshots get_buf returns.
//
// Invariants (sanity_check reports them under stable names):
//  1. every slot is either free (exactly once in the free list) or allocated, never both;
//     free + allocated == slot_count                                       "metadata.free_list"
//  2. every field of a free slot is cleared (zeros, counts 0, no room)   "metadata.stale_field"
//  3. a record's counts never exceed the capacities and its hidden state is exactly
//     hidden_state_bytes (set_buf KV_ASSERTs);
//  4. set_buf, get_buf and free on a slot that is not allocated are programmer errors (KV_ASSERT).
// The free list is LIFO: the most recently freed slot is reused first, so aliasing bugs show.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/common/sanity.h"
#include "core/common/types.h"

namespace kvsim {

using MetadataSlot = int32_t;

// The cached_tokens row: SGLang's columns 0 total, 1 device, 2 host, 3 storage, 4-6 multimodal.
struct CachedTokenCounts {
  int64_t total = 0;
  int64_t device = 0;
  int64_t host = 0;
  int64_t storage = 0;
  std::array<int64_t, 3> multimodal{};

  friend bool operator==(const CachedTokenCounts&, const CachedTokenCounts&) = default;
};

// One request's metadata, as set_buf takes it and get_buf returns it (an owned value).
struct MetadataRecord {
  Token first_output_token = 0;
  CachedTokenCounts cached_tokens;
  double output_logprob = 0.0;
  std::vector<Token> top_k_ids;         // size <= top_k_capacity
  std::vector<std::byte> hidden_state;  // exactly hidden_state_bytes
  std::vector<int32_t> sparse_top_k;    // size <= sparse_top_k_capacity
  std::optional<uint64_t> bootstrap_room;

  friend bool operator==(const MetadataRecord&, const MetadataRecord&) = default;
};

// The name of the first field in which `a` and `b` differ, or nullptr when they are equal.
const char* first_differing_field(const MetadataRecord& a, const MetadataRecord& b);

// What get_buf hands out: an immutable record the request holds until it runs.
using MetadataSnapshot = std::shared_ptr<const MetadataRecord>;

struct MetadataBuffersOptions {
  int32_t slot_count = 0;
  int32_t top_k_capacity = 8;
  size_t hidden_state_bytes = 0;
  int32_t sparse_top_k_capacity = 64;
};

class MetadataBuffers {
 public:
  explicit MetadataBuffers(const MetadataBuffersOptions& options);

  std::optional<MetadataSlot> alloc();  // nullopt when every slot is taken
  void set_buf(MetadataSlot slot, const MetadataRecord& record);
  // A clone of the slot's row: later writes to the slot (free, the next owner's set_buf)
  // never reach it.
  MetadataSnapshot get_buf(MetadataSlot slot) const;
  void free(MetadataSlot slot);  // clears every field, then free-lists

  bool is_allocated(MetadataSlot slot) const;
  int32_t slot_count() const { return options_.slot_count; }
  int32_t available_size() const { return static_cast<int32_t>(free_slots_.size()); }
  const MetadataBuffersOptions& options() const { return options_; }

  // Adds "metadata.free_list" and "metadata.stale_field" violations (O(slots × record size)).
  void sanity_check(SanityReport& report) const;

 private:
  friend struct MetadataBuffersTestPeer;  // tests corrupt the state to exercise sanity_check

  void check_allocated(MetadataSlot slot, const char* operation) const;
  void clear(MetadataSlot slot);
  // The first non-cleared field of `slot`, or nullptr.
  const char* stale_field(MetadataSlot slot) const;
  void check_free_list(SanityReport& report) const;

  MetadataBuffersOptions options_;
  std::vector<MetadataSlot> free_slots_;               // back = next to hand out
  std::vector<uint8_t> allocated_;                     // per slot: 1 allocated, 0 free
  std::vector<std::shared_ptr<MetadataRecord>> rows_;  // one per slot, never reseated
  MetadataRecord cleared_;  // what a free row holds: zeros, no room, hidden state of zeros
};

}  // namespace kvsim
