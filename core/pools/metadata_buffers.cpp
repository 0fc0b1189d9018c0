#include "core/pools/metadata_buffers.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {
namespace {

size_t to_size(int32_t n) {
  return static_cast<size_t>(n);
}

// Field by field into a row whose capacities were reserved at construction: no allocation, and
// no field of the row's previous contents survives (shorter top-k lists included).
void assign_row(MetadataRecord& row, const MetadataRecord& from) {
  row.first_output_token = from.first_output_token;
  row.cached_tokens = from.cached_tokens;
  row.output_logprob = from.output_logprob;
  row.top_k_ids.assign(from.top_k_ids.begin(), from.top_k_ids.end());
  row.hidden_state.assign(from.hidden_state.begin(), from.hidden_state.end());
  row.sparse_top_k.assign(from.sparse_top_k.begin(), from.sparse_top_k.end());
  row.bootstrap_room = from.bootstrap_room;
}

}  // namespace

const char* first_differing_field(const MetadataRecord& a, const MetadataRecord& b) {
  if (a.first_output_token != b.first_output_token) return "first_output_token";
  if (a.cached_tokens != b.cached_tokens) return "cached_tokens";
  if (a.output_logprob != b.output_logprob) return "output_logprob";
  if (a.top_k_ids != b.top_k_ids) return "top_k_ids";
  if (a.hidden_state != b.hidden_state) return "hidden_state";
  if (a.sparse_top_k != b.sparse_top_k) return "sparse_top_k";
  if (a.bootstrap_room != b.bootstrap_room) return "bootstrap_room";
  return nullptr;
}

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
  cleared_.hidden_state.assign(options.hidden_state_bytes, std::byte{0});
  rows_.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    auto row = std::make_shared<MetadataRecord>(cleared_);
    row->top_k_ids.reserve(to_size(options.top_k_capacity));
    row->sparse_top_k.reserve(to_size(options.sparse_top_k_capacity));
    rows_.push_back(std::move(row));
  }
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
  assign_row(*rows_[to_size(slot)], record);
}

MetadataSnapshot MetadataBuffers::get_buf(MetadataSlot slot) const {
  check_allocated(slot, "get_buf");
  return std::make_shared<const MetadataRecord>(*rows_[to_size(slot)]);  // the clone (seed 003)
}

void MetadataBuffers::free(MetadataSlot slot) {
  check_allocated(slot, "free");
  clear(slot);
  allocated_[to_size(slot)] = 0;
  free_slots_.push_back(slot);
  KV_VERIFY(stale_field(slot) == nullptr, "metadata free left a stale field");
}

void MetadataBuffers::clear(MetadataSlot slot) {
  // Every field, bootstrap_room included (SGLang #27374: a stale room must not reach the next
  // owner).
  assign_row(*rows_[to_size(slot)], cleared_);
}

const char* MetadataBuffers::stale_field(MetadataSlot slot) const {
  return first_differing_field(*rows_[to_size(slot)], cleared_);
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
