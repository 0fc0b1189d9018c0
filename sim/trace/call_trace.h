// Call traces: direct calls into the core's radix tree, recorded in production (the Python
// module `kvsim`, docs/sglang.md "Recording") and replayed by `kvsim replay` / `kvsim shrink`.
//
//   header {"kvsim_trace":1,"kind":"calls","page_size":P,"eviction_policy":"lru","source":...}
//   one call per line, with the outcome the recording process saw:
//     {"op":"match","ns":0,"tokens":[...],"out":{"hit":H,"node":N}}
//     {"op":"insert","ns":0,"tokens":[...],"value":[...],"out":{"prefix":L,"node":N}}
//     {"op":"lock","of":K}     K: index of the match/insert call whose returned node is locked
//     {"op":"unlock","of":K}   K: index of the lock call released
//     {"op":"evict","n":T,"out":{"freed":F,"slots":"<hash>"}}
//   footer {"end":{"calls":C,"event_hash":"..","nodes":..,"evictable":..,"protected":..,
//           "violation":{"call":I,"detail":"file:line: expr: message"}?, "truncated":true?}}
//   or, written by the recording process's SIGTERM / SIGABRT handler (it cannot read the tree):
//   footer {"end":{"calls":C,"event_hash":"..","cut_by_signal":N}}
// Every recording ends with a footer: a file without one (the process was killed by a signal
// no handler sees, SIGKILL, or the file was cut) is not a whole recording and is refused.
//
// A segment of a windowed recording (the last N calls) starts, right after the header, with a
// snapshot of the tree at its first call (sim/trace/call_trace_snapshot.h): a line
// {"snapshot":{"nodes":K,...}} and K node lines. Replay restores it (RadixTree::restore), then
// applies the calls. Two call forms name what predates the segment:
//     {"op":"lock","node":X}   X: a node of the snapshot, by id
//     {"op":"unlock","lock":{"call":G,"anchor":A,"start":S}}   a lock taken before the segment
//                              (call G of the whole recording), released from node S up
//
// How it differs from a simulated op trace: no scenario, no scheduler seed, no requests. The
// lines are the calls themselves (inputs and outcomes), so replay applies them to a fresh
// RadixTree with caller-owned slots, exactly; node references are call indices, so a shrunk
// trace stays meaningful (a call whose referent was dropped is skipped).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/types.h"
#include "core/tree/eviction_policy.h"
#include "core/tree/radix_tree.h"

namespace kvsim::sim {

enum class CallKind : uint8_t { kMatch = 0, kInsert = 1, kLock = 2, kUnlock = 3, kEvict = 4 };

struct Call {
  CallKind kind = CallKind::kMatch;
  Namespace ns = 0;
  std::vector<Token> tokens;        // match, insert
  std::vector<SlotIndex> value;     // insert: the slots of [value_from, aligned key length)
  size_t value_from = 0;            // insert: the tree read no slot before it (not recorded)
  int64_t ref = -1;                 // lock: producing call; unlock: lock call
  int64_t n = 0;                    // evict: tokens asked
  std::optional<NodeId> node;       // lock: a node of the trace's snapshot, by id (ref is -1)
  std::optional<HeldLock> earlier;  // unlock: a lock taken before the snapshot (ref is -1)
  int64_t earlier_call = -1;        // ... its lock call in the whole recording
};

// What a call returned, folded into the event hash.
struct CallOutcome {
  int64_t amount = 0;       // match: hit tokens; insert: prefix_len; evict: tokens freed
  NodeId node = 0;          // match / insert: the returned node
  uint64_t slots_hash = 0;  // evict: hash of the freed slots in order
};

// Frees at least `tokens` device tokens by removing whole least-recently-used unlocked leaves
// (SGLang's RadixCache.evict on a device-only tree). Shared by the module and replay.
struct EvictedLeaves {
  std::vector<IndexVector> freed;                 // each victim's device slots, in eviction order
  int64_t freed_tokens = 0;                       // their total size
  std::vector<std::pair<NodeId, int64_t>> nodes;  // (id, tokens), in eviction order
  std::vector<std::vector<Token>> paths;          // token paths, when asked

  // Every freed slot, in order, into out[0, freed_tokens) (a caller's buffer: no zero fill).
  void copy_slots_to(SlotIndex* out) const;
  std::vector<SlotIndex> slots() const;
};
EvictedLeaves evict_device_leaves(RadixTree& tree, int64_t tokens, bool with_paths);

// The hash of an evict's freed slots, in order. Version 1 (the default, every trace without a
// "slots_hash" header field) chains mix64 over the slots; version 2 (the module's recordings)
// runs four independent lanes, several times faster on the millions of slots a large evict frees;
// version 3 (the module's recordings since) folds the maximal runs of consecutive slots as
// (start, length): a paged allocator's slots are a few runs, so it is one compare per slot.
inline constexpr int kSlotsHashLatest = 3;
uint64_t hash_slots(const std::vector<SlotIndex>& slots, int version = 1);
// hash_slots(freed.slots(), version) without building that vector: version 3 folds the runs
// of each victim's slots, joined across victims where they continue.
uint64_t hash_freed_slots(const EvictedLeaves& freed, int version);
// The event hash after one more call.
uint64_t fold_call(uint64_t hash, CallKind kind, const CallOutcome& out);
inline constexpr uint64_t kCallHashSeed = 0x6b7673696d63616cULL;

std::string_view to_string(CallKind kind);
// slots_hash: the hash_slots version the trace's evict outcomes use (written when not 1).
nlohmann::json call_trace_header(int32_t page_size, EvictionPolicy policy,
                                 const std::string& source, int slots_hash = 1);
// One call line; `out` is written when given.
nlohmann::json call_to_json(const Call& call, const CallOutcome* out);

struct CallTraceEnd {
  size_t calls = 0;
  uint64_t event_hash = 0;
  size_t nodes = 0;
  int64_t evictable = 0;
  int64_t protected_size = 0;
  std::optional<std::pair<size_t, std::string>> violation;  // (call index, detail)
  bool truncated = false;
  int cut_by_signal = 0;  // the recording process's signal handler wrote this footer: no sizes
};
nlohmann::json call_trace_footer(const CallTraceEnd& end);

}  // namespace kvsim::sim
