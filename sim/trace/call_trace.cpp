#include "sim/trace/call_trace.h"

#include "sim/base/hex64.h"

namespace kvsim::sim {
namespace {

uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  return h;
}

}  // namespace

EvictedLeaves evict_device_leaves(RadixTree& tree, int64_t tokens, bool with_paths) {
  EvictedLeaves out;
  int64_t done = 0;
  while (done < tokens) {
    TreeNode* victim = tree.next_device_victim();
    if (victim == nullptr) break;
    if (with_paths) out.paths.push_back(RadixTree::prefix_tokens(*victim));
    out.nodes.emplace_back(victim->id, victim->token_count());
    ReleasedSlots released = tree.remove_device_leaf(*victim);
    out.freed.push_back(std::move(*released.device[index_of(ComponentType::kFull)]));
    done += static_cast<int64_t>(out.freed.back().size());
  }
  out.freed_tokens = done;
  return out;
}

void EvictedLeaves::copy_slots_to(SlotIndex* out) const {
  for (const IndexVector& v : freed) {
    v.copy_slots_to(out);
    out += v.size();
  }
}

std::vector<SlotIndex> EvictedLeaves::slots() const {
  std::vector<SlotIndex> out(static_cast<size_t>(freed_tokens));
  copy_slots_to(out.data());
  return out;
}

uint64_t hash_freed_slots(const EvictedLeaves& e, int version) {
  if (version != 3) return hash_slots(e.slots(), version);
  // The maximal runs of the concatenation: each vector's runs, the last one held back until
  // the next run shows whether it continues it.
  uint64_t h = mix64(static_cast<uint64_t>(e.freed_tokens), 3);
  SlotIndex start = 0;
  int64_t len = 0;
  for (const IndexVector& v : e.freed) {
    if (v.empty()) continue;
    v.for_each_run(0, v.size(), [&](size_t i, size_t j) {
      const SlotIndex first = v[i];
      if (len > 0 && first == start + len) {
        len += static_cast<int64_t>(j - i);
        return;
      }
      if (len > 0) h = mix64(mix64(h, static_cast<uint64_t>(start)), static_cast<uint64_t>(len));
      start = first;
      len = static_cast<int64_t>(j - i);
    });
  }
  if (len > 0) h = mix64(mix64(h, static_cast<uint64_t>(start)), static_cast<uint64_t>(len));
  return h;
}

uint64_t hash_slots(const std::vector<SlotIndex>& slots, int version) {
  uint64_t h = slots.size();
  if (version == 3) {
    h = mix64(h, 3);
    for_each_consecutive_run(slots, [&](size_t i, size_t j) {
      h = mix64(mix64(h, static_cast<uint64_t>(slots[i])), static_cast<uint64_t>(j - i));
    });
    return h;
  }
  if (version != 2) {
    for (SlotIndex s : slots)
      h = mix64(h, static_cast<uint64_t>(s));
    return h;
  }
  uint64_t lane[4] = {h, h + 1, h + 2, h + 3};
  const size_t n = slots.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t k = 0; k < 4; ++k)
      lane[k] = mix64(lane[k], static_cast<uint64_t>(slots[i + k]));
  }
  for (; i < n; ++i)
    lane[0] = mix64(lane[0], static_cast<uint64_t>(slots[i]));
  return mix64(mix64(mix64(lane[0], lane[1]), lane[2]), lane[3]);
}

uint64_t fold_call(uint64_t hash, CallKind kind, const CallOutcome& out) {
  hash = mix64(hash, static_cast<uint64_t>(kind));
  hash = mix64(hash, static_cast<uint64_t>(out.amount));
  hash = mix64(hash, out.node);
  return mix64(hash, out.slots_hash);
}

std::string_view to_string(CallKind kind) {
  switch (kind) {
    case CallKind::kMatch:
      return "match";
    case CallKind::kInsert:
      return "insert";
    case CallKind::kLock:
      return "lock";
    case CallKind::kUnlock:
      return "unlock";
    case CallKind::kEvict:
      return "evict";
  }
  return "?";
}

nlohmann::json call_trace_header(int32_t page_size, EvictionPolicy policy,
                                 const std::string& source, int slots_hash) {
  nlohmann::json j{{"kvsim_trace", 1},
                   {"kind", "calls"},
                   {"page_size", page_size},
                   {"eviction_policy", std::string(to_string(policy))},
                   {"source", source}};
  if (slots_hash != 1) j["slots_hash"] = slots_hash;
  return j;
}

nlohmann::json call_to_json(const Call& call, const CallOutcome* out) {
  nlohmann::json j{{"op", std::string(to_string(call.kind))}};
  switch (call.kind) {
    case CallKind::kMatch:
      j["ns"] = call.ns;
      j["tokens"] = call.tokens;
      if (out) j["out"] = {{"hit", out->amount}, {"node", out->node}};
      break;
    case CallKind::kInsert:
      j["ns"] = call.ns;
      j["tokens"] = call.tokens;
      j["value"] = call.value;
      if (call.value_from > 0) j["val_from"] = call.value_from;
      if (out) j["out"] = {{"prefix", out->amount}, {"node", out->node}};
      break;
    case CallKind::kLock:
      if (call.node) {
        j["node"] = *call.node;
      } else {
        j["of"] = call.ref;
      }
      break;
    case CallKind::kUnlock:
      if (call.earlier) {
        nlohmann::json lock{{"call", call.earlier_call}, {"anchor", call.earlier->anchor}};
        if (call.earlier->start) lock["start"] = *call.earlier->start;
        j["lock"] = lock;
      } else {
        j["of"] = call.ref;
      }
      break;
    case CallKind::kEvict:
      j["n"] = call.n;
      if (out) j["out"] = {{"freed", out->amount}, {"slots", hex64(out->slots_hash)}};
      break;
  }
  return j;
}

nlohmann::json call_trace_footer(const CallTraceEnd& end) {
  if (end.cut_by_signal != 0) {
    return {{"end",
             {{"calls", end.calls},
              {"event_hash", hex64(end.event_hash)},
              {"cut_by_signal", end.cut_by_signal}}}};
  }
  nlohmann::json e{{"calls", end.calls},
                   {"event_hash", hex64(end.event_hash)},
                   {"nodes", end.nodes},
                   {"evictable", end.evictable},
                   {"protected", end.protected_size}};
  if (end.violation)
    e["violation"] = {{"call", end.violation->first}, {"detail", end.violation->second}};
  if (end.truncated) e["truncated"] = true;
  return {{"end", e}};
}

}  // namespace kvsim::sim
