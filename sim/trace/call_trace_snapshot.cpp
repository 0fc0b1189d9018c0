#include "sim/trace/call_trace_snapshot.h"

#include <cstdint>

#include "core/common/assert.h"

namespace kvsim::sim {
namespace {

// A node value: its slots (runs or inline, one per token) and "<stride_key>" P, which says the
// node stores it page-granular (first slots of pages of P consecutive slots).
// At most one slot per token of the node's key (restore names a shorter value).
SnapshotValue value_from(JsonReader& r, const std::string& blob, const std::string& runs_key,
                         const std::string& inline_key, const std::string& stride_key,
                         size_t key_tokens) {
  const auto stride = static_cast<int32_t>(r.integer(stride_key, 1, 1, INT32_MAX));
  std::vector<SlotIndex> slots = value_of(r, blob, runs_key, inline_key, key_tokens);
  if (stride == 1) return SnapshotValue{1, std::move(slots)};
  const auto P = static_cast<size_t>(stride);
  const std::string field = r.has(runs_key) ? runs_key : inline_key;
  if (slots.size() % P != 0) r.fail(field, "not whole pages of " + std::to_string(P) + " slots");
  SnapshotValue v{stride, {}};
  for (size_t k = 0; k < slots.size(); k += P) {
    for (size_t i = 1; i < P; ++i) {
      if (slots[k + i] != slots[k] + static_cast<SlotIndex>(i)) {
        r.fail(field, "page " + std::to_string(k / P) + " is not " + std::to_string(P) +
                          " consecutive slots (" + stride_key + " " + std::to_string(P) + ")");
      }
    }
    v.entries.push_back(slots[k]);
  }
  return v;
}

// One slot per token, as the node lines hold them.
nlohmann::json slots_json(const SnapshotValue& v) {
  std::vector<SlotIndex> slots;
  for (SlotIndex first : v.entries) {
    for (int32_t i = 0; i < v.stride; ++i)
      slots.push_back(first + i);
  }
  return slots;
}

}  // namespace

CallTraceSnapshot read_snapshot_record(const nlohmann::json& j, const std::string& where,
                                       size_t line, int32_t page_size, EvictionPolicy policy) {
  JsonReader whole(j, where);
  JsonReader r = whole.object("snapshot");
  CallTraceSnapshot s;
  s.line = line;
  s.tree.page_size = page_size;
  s.tree.eviction_policy = policy;
  s.announced = static_cast<size_t>(r.required_integer("nodes", 0, INT64_MAX));
  s.tree.next_id = static_cast<NodeId>(r.required_integer("next_id", 1, INT64_MAX));
  s.tree.clock = static_cast<uint64_t>(r.required_integer("clock", 0, INT64_MAX));
  s.first_call = static_cast<uint64_t>(r.integer("first_call", 0, 0, INT64_MAX));
  s.segment = static_cast<uint64_t>(r.integer("segment", 0, 0, INT64_MAX));
  if (r.has("locks")) {
    const nlohmann::json& locks = r.raw("locks");
    if (!locks.is_array()) r.fail("locks", "expected an array");
    for (size_t i = 0; i < locks.size(); ++i) {
      const std::string at = "locks[" + std::to_string(i) + "]";
      if (!locks[i].is_object()) r.fail(at, "expected an object");
      JsonReader l(locks[i], where, r.field(at));
      s.lock_calls.push_back(l.required_integer("call", 0, INT64_MAX));
      HeldLock h;
      h.anchor = static_cast<NodeId>(l.required_integer("anchor", 0, INT64_MAX));
      if (l.has("start")) h.start = static_cast<NodeId>(l.required_integer("start", 1, INT64_MAX));
      l.finish();
      s.locks.push_back(h);
    }
  }
  s.locks_disagree = r.string("locks_disagree", "");
  r.finish();
  whole.finish();
  if (s.locks_disagree.empty()) s.tree.held_locks = s.locks;
  return s;
}

void read_snapshot_node(JsonReader& r, size_t line, CallTraceSnapshot& s, const std::string& blob,
                        PageIds& pages) {
  NodeSnapshot n;
  n.id = static_cast<NodeId>(r.required_integer("node", 1, INT64_MAX));
  if (s.tree.nodes.size() >= s.announced) {
    r.fail("node", "one node line more than the snapshot's " + std::to_string(s.announced));
  }
  n.parent = static_cast<NodeId>(r.required_integer("parent", 0, INT64_MAX));
  n.ns = static_cast<Namespace>(r.integer("ns", 0, 0, INT64_MAX));
  if (r.has("tok_of")) r.fail("tok_of", "a snapshot node holds its own tokens");
  static const std::vector<Call> kNoCalls;
  n.key = tokens_of(r, kNoCalls, 0, blob, pages);
  if (r.has("val_runs") || r.has("value")) {
    n.value = value_from(r, blob, "val_runs", "value", "stride", n.key.size());
  }
  if (r.has("host_runs") || r.has("host_value")) {
    n.host_value = value_from(r, blob, "host_runs", "host_value", "host_stride", n.key.size());
  }
  n.lock_ref = static_cast<int32_t>(r.integer("lock_ref", 0, 0, INT32_MAX));
  n.host_lock_ref = static_cast<int32_t>(r.integer("host_lock_ref", 0, 0, INT32_MAX));
  n.last_access = static_cast<uint64_t>(r.required_integer("last_access", 0, INT64_MAX));
  n.creation = static_cast<uint64_t>(r.required_integer("creation", 0, INT64_MAX));
  n.hit_count = static_cast<uint64_t>(r.required_integer("hit_count", 0, INT64_MAX));
  r.finish();
  s.node_lines.emplace(n.id, line);
  s.tree.nodes.push_back(std::move(n));
}

void check_snapshot(const CallTraceSnapshot& s, const std::string& source) {
  RadixTreeOptions options;
  options.page_size = s.tree.page_size;
  options.eviction_policy = s.tree.eviction_policy;
  ScopedThrowingAsserts throwing;
  RadixTree tree(options);
  try {
    tree.restore(s.tree);
  } catch (const SnapshotError& e) {
    size_t line = s.line;
    if (e.node()) {
      auto it = s.node_lines.find(*e.node());
      if (it != s.node_lines.end()) line = it->second;
    }
    throw InputError(source + ":" + std::to_string(line) + ": snapshot: " + e.what());
  } catch (const AssertionFailure& e) {
    throw InputError(source + ":" + std::to_string(s.line) +
                     ": snapshot: core assertion: " + e.what());
  }
}

std::vector<nlohmann::json> snapshot_to_json(const CallTraceSnapshot& s) {
  std::vector<nlohmann::json> out;
  nlohmann::json locks = nlohmann::json::array();
  for (size_t i = 0; i < s.locks.size(); ++i) {
    nlohmann::json l{{"call", i < s.lock_calls.size() ? s.lock_calls[i] : 0},
                     {"anchor", s.locks[i].anchor}};
    if (s.locks[i].start) l["start"] = *s.locks[i].start;
    locks.push_back(l);
  }
  nlohmann::json rec{{"nodes", s.tree.nodes.size()}, {"next_id", s.tree.next_id},
                     {"clock", s.tree.clock},        {"first_call", s.first_call},
                     {"segment", s.segment},         {"locks", locks}};
  if (!s.locks_disagree.empty()) rec["locks_disagree"] = s.locks_disagree;
  out.push_back({{"snapshot", rec}});
  for (const NodeSnapshot& n : s.tree.nodes) {
    nlohmann::json j{{"node", n.id}, {"parent", n.parent}, {"ns", n.ns}, {"tokens", n.key}};
    if (n.value) {
      j["value"] = slots_json(*n.value);
      if (n.value->stride != 1) j["stride"] = n.value->stride;
    }
    if (n.host_value) {
      j["host_value"] = slots_json(*n.host_value);
      if (n.host_value->stride != 1) j["host_stride"] = n.host_value->stride;
    }
    if (n.lock_ref != 0) j["lock_ref"] = n.lock_ref;
    if (n.host_lock_ref != 0) j["host_lock_ref"] = n.host_lock_ref;
    j["last_access"] = n.last_access;
    j["creation"] = n.creation;
    j["hit_count"] = n.hit_count;
    out.push_back(j);
  }
  return out;
}

}  // namespace kvsim::sim
