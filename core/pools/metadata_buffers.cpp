#include "core/pools/metadata_buffers.h"

#include <algorithm>
#include <string>

#include "core/common/assert.h"

namespace kvsim {
namespace {

size_t to_size(int32_t n) {
  return static_cast<size_t>(n);
}

template <class T>
bool all_zero(const std::vector<T>& column, size_t begin, size_t count) {
  return std::all_of(column.begin() + static_cast<ptrdiff_t>(begin),
                     column.begin() + static_cast<ptrdiff_t>(begin + count),
                     [](const T& v) { return v == T{}; });
}

}  // namespace

MetadataBuffers::MetadataBuffers(const MetadataBuffersOptions& options) : options_(options) {
  KV_ASSERT(options.slot_count > 0, "metadata buffers need slots");
  KV_ASSERT(options.top_k_capacity >= 0, "metadata top-k capacity must not be negative");
  KV_ASSERT(options.sparse_top_k_capacity >= 0,
            "metadata sparse top-k capacity must not be negative");
  const size_t n = to_size(options.slot_count);
  allocated_.assign(n, 0);
  free_slots_.reserve(n);
  for (MetadataSlot s = options.slot_count - 1; s >= 0; --s)
    free_slots_.push_back(s);  // slot 0 is handed out first
  first_output_token_.assign(n, 0);
  cached_tokens_.assign(n, CachedTokenCounts{});
  output_logprob_.assign(n, 0.0);
  top_k_ids_.assign(n * to_size(options.top_k_capacity), 0);
  top_k_count_.assign(n, 0);
  hidden_state_.assign(n * options.hidden_state_bytes, std::byte{0});
  sparse_top_k_.assign(n * to_size(options.sparse_top_k_capacity), 0);
  sparse_top_k_count_.assign(n, 0);
  bootstrap_room_.assign(n, 0);
  has_bootstrap_room_.assign(n, 0);
}

bool MetadataBuffers::is_allocated(MetadataSlot slot) const {
  return slot >= 0 && slot < options_.slot_count && allocated_[to_size(slot)] != 0;
}

void MetadataBuffers::check_allocated(MetadataSlot slot, const char* operation) const {
  KV_ASSERT(slot >= 0 && slot < options_.slot_count,
            std::string("metadata ") + operation + " of slot " + std::to_string(slot) +
                " outside [0, " + std::to_string(options_.slot_count) + ")");
  KV_ASSERT(
      allocated_[to_size(slot)] != 0,
      std::string("metadata ") + operation + " of free slot " + std::to_string(slot) +
          (std::string(operation) == "free" ? " (double free?)" : " (freed and not reallocated?)"));
}

std::optional<MetadataSlot> MetadataBuffers::alloc() {
  if (free_slots_.empty()) return std::nullopt;
  const MetadataSlot slot = free_slots_.back();
  free_slots_.pop_back();
  KV_ASSERT(slot >= 0 && slot < options_.slot_count, "metadata free list holds an invalid slot");
  KV_ASSERT(allocated_[to_size(slot)] == 0,
            "metadata slot " + std::to_string(slot) + " is free-listed but allocated");
  KV_VERIFY(stale_field(slot) == nullptr,
            "metadata slot " + std::to_string(slot) + " handed out with a stale field");
  allocated_[to_size(slot)] = 1;
  return slot;
}

void MetadataBuffers::set_buf(MetadataSlot slot, const MetadataRecord& record) {
  check_allocated(slot, "set_buf");
  KV_ASSERT(record.top_k_ids.size() <= to_size(options_.top_k_capacity),
            "metadata top-k of " + std::to_string(record.top_k_ids.size()) +
                " ids exceeds capacity " + std::to_string(options_.top_k_capacity));
  KV_ASSERT(record.sparse_top_k.size() <= to_size(options_.sparse_top_k_capacity),
            "metadata sparse top-k of " + std::to_string(record.sparse_top_k.size()) +
                " indices exceeds capacity " + std::to_string(options_.sparse_top_k_capacity));
  KV_ASSERT(record.hidden_state.size() == options_.hidden_state_bytes,
            "metadata hidden state of " + std::to_string(record.hidden_state.size()) +
                " bytes, slots hold " + std::to_string(options_.hidden_state_bytes));
  clear(slot);  // no field of a previous set_buf survives (shorter top-k lists included)
  const size_t s = to_size(slot);
  first_output_token_[s] = record.first_output_token;
  cached_tokens_[s] = record.cached_tokens;
  output_logprob_[s] = record.output_logprob;
  std::copy(record.top_k_ids.begin(), record.top_k_ids.end(),
            top_k_ids_.begin() + static_cast<ptrdiff_t>(s * to_size(options_.top_k_capacity)));
  top_k_count_[s] = static_cast<int32_t>(record.top_k_ids.size());
  std::copy(record.hidden_state.begin(), record.hidden_state.end(),
            hidden_state_.begin() + static_cast<ptrdiff_t>(s * options_.hidden_state_bytes));
  std::copy(
      record.sparse_top_k.begin(), record.sparse_top_k.end(),
      sparse_top_k_.begin() + static_cast<ptrdiff_t>(s * to_size(options_.sparse_top_k_capacity)));
  sparse_top_k_count_[s] = static_cast<int32_t>(record.sparse_top_k.size());
  bootstrap_room_[s] = record.bootstrap_room.value_or(0);
  has_bootstrap_room_[s] = record.bootstrap_room.has_value() ? 1 : 0;
}

MetadataRecord MetadataBuffers::get_buf(MetadataSlot slot) const {
  check_allocated(slot, "get_buf");
  const size_t s = to_size(slot);
  const auto top_k =
      top_k_ids_.begin() + static_cast<ptrdiff_t>(s * to_size(options_.top_k_capacity));
  const auto hidden =
      hidden_state_.begin() + static_cast<ptrdiff_t>(s * options_.hidden_state_bytes);
  const auto sparse =
      sparse_top_k_.begin() + static_cast<ptrdiff_t>(s * to_size(options_.sparse_top_k_capacity));
  MetadataRecord record;
  record.first_output_token = first_output_token_[s];
  record.cached_tokens = cached_tokens_[s];
  record.output_logprob = output_logprob_[s];
  record.top_k_ids.assign(top_k, top_k + top_k_count_[s]);
  record.hidden_state.assign(hidden, hidden + static_cast<ptrdiff_t>(options_.hidden_state_bytes));
  record.sparse_top_k.assign(sparse, sparse + sparse_top_k_count_[s]);
  if (has_bootstrap_room_[s] != 0) record.bootstrap_room = bootstrap_room_[s];
  return record;
}

void MetadataBuffers::free(MetadataSlot slot) {
  check_allocated(slot, "free");
  clear(slot);
  allocated_[to_size(slot)] = 0;
  free_slots_.push_back(slot);
  KV_VERIFY(stale_field(slot) == nullptr, "metadata free left a stale field");
}

void MetadataBuffers::clear(MetadataSlot slot) {
  const size_t s = to_size(slot);
  first_output_token_[s] = 0;
  cached_tokens_[s] = CachedTokenCounts{};
  output_logprob_[s] = 0.0;
  const size_t k = to_size(options_.top_k_capacity);
  std::fill_n(top_k_ids_.begin() + static_cast<ptrdiff_t>(s * k), k, 0);
  top_k_count_[s] = 0;
  const size_t h = options_.hidden_state_bytes;
  std::fill_n(hidden_state_.begin() + static_cast<ptrdiff_t>(s * h), h, std::byte{0});
  const size_t sk = to_size(options_.sparse_top_k_capacity);
  std::fill_n(sparse_top_k_.begin() + static_cast<ptrdiff_t>(s * sk), sk, 0);
  sparse_top_k_count_[s] = 0;
  bootstrap_room_[s] = 0;  // SGLang #27374: a stale room must not reach the next owner
  has_bootstrap_room_[s] = 0;
}

const char* MetadataBuffers::stale_field(MetadataSlot slot) const {
  const size_t s = to_size(slot);
  if (first_output_token_[s] != 0) return "first_output_token";
  if (!(cached_tokens_[s] == CachedTokenCounts{})) return "cached_tokens";
  if (output_logprob_[s] != 0.0) return "output_logprob";
  const size_t k = to_size(options_.top_k_capacity);
  if (top_k_count_[s] != 0 || !all_zero(top_k_ids_, s * k, k)) return "top_k_ids";
  const size_t h = options_.hidden_state_bytes;
  if (!all_zero(hidden_state_, s * h, h)) return "hidden_state";
  const size_t sk = to_size(options_.sparse_top_k_capacity);
  if (sparse_top_k_count_[s] != 0 || !all_zero(sparse_top_k_, s * sk, sk)) return "sparse_top_k";
  if (has_bootstrap_room_[s] != 0 || bootstrap_room_[s] != 0) return "bootstrap_room";
  return nullptr;
}

void MetadataBuffers::check_free_list(SanityReport& report) const {
  std::vector<uint8_t> listed(to_size(options_.slot_count), 0);
  for (MetadataSlot slot : free_slots_) {
    if (slot < 0 || slot >= options_.slot_count) {
      report.add("metadata.free_list", "free list holds slot " + std::to_string(slot) +
                                           " outside [0, " + std::to_string(options_.slot_count) +
                                           ")");
      continue;
    }
    if (listed[to_size(slot)]++ != 0) {
      report.add("metadata.free_list", "slot is free-listed twice (double free)", std::nullopt,
                 slot);
    }
    if (allocated_[to_size(slot)] != 0) {
      report.add("metadata.free_list", "allocated slot is free-listed", std::nullopt, slot);
    }
  }
  for (MetadataSlot slot = 0; slot < options_.slot_count; ++slot) {
    if (allocated_[to_size(slot)] == 0 && listed[to_size(slot)] == 0) {
      report.add("metadata.free_list", "slot is neither allocated nor free-listed (leaked)",
                 std::nullopt, slot);
    }
  }
}

void MetadataBuffers::sanity_check(SanityReport& report) const {
  check_free_list(report);
  for (MetadataSlot slot = 0; slot < options_.slot_count; ++slot) {
    if (allocated_[to_size(slot)] != 0) continue;
    if (const char* field = stale_field(slot); field != nullptr) {
      report.add("metadata.stale_field",
                 std::string("free slot still holds ") + field + " from its last owner",
                 std::nullopt, slot);
    }
  }
}

}  // namespace kvsim
