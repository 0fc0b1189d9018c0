// Reading a call trace's keys and slot values (sim/trace/call_trace.h): inline JSON arrays or
// [byte offset, count] references into the binary sidecar, and page hashes turned into
// synthetic pages. Shared by the call lines and the snapshot's node lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/trace/call_trace.h"

namespace kvsim::sim {

// [byte offset, count] into the binary sidecar, checked against its size.
std::pair<size_t, size_t> blob_range(JsonReader& r, const std::string& key, size_t item,
                                     const std::string& blob);

// Pages recorded as 64-bit hashes (the module, page_size >= 4): each distinct hash becomes one
// synthetic page, every token of it the hash's number in order of first appearance, so equal
// pages stay equal and different ones different (the tree compares whole pages only).
struct PageIds {
  std::map<uint64_t, Token> ids;
  int32_t page_size = 1;
};

// A key: "tok_of" [earlier call, count] (that call's first tokens), then "tok" [offset, count]
// tokens or "pages" [offset, count] page hashes in the sidecar; or an inline "tokens" array.
// `index` is the call's own index (tok_of names an earlier one).
std::vector<Token> tokens_of(JsonReader& r, const std::vector<Call>& calls, size_t index,
                             const std::string& blob, PageIds& pages);

// Slots: "<runs_key>" [offset, runs] of int64 (first, length) runs in the sidecar, or an
// inline "<inline_key>" array; runs that add up to more than `max_slots` are refused before
// they are expanded.
std::vector<SlotIndex> value_of(JsonReader& r, const std::string& blob,
                                const std::string& runs_key = "val_runs",
                                const std::string& inline_key = "value",
                                size_t max_slots = size_t{1} << 31);

}  // namespace kvsim::sim
