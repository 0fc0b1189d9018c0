// The snapshot record that starts a segment of a windowed call-trace recording (the Python
// module's record_window, docs/sglang.md "Recording"): the tree as it was at the segment's
// first call, which `kvsim replay` restores (RadixTree::restore) before applying the calls.
//
//   {"snapshot":{"nodes":K,"next_id":N,"clock":C,"first_call":G,"segment":S,
//                "locks":[{"call":G1,"anchor":A,"start":X},...],"locks_disagree":"..."?}}
//   then K lines, one per node, by increasing id:
//   {"node":ID,"parent":P,"ns":NS,"tok"|"pages":[off,n] or "tokens":[..],
//    "val_runs":[off,runs] or "value":[..] (absent: evicted),"stride":S?,
//    "host_runs" or "host_value"?,"host_stride"?,"lock_ref":L?,"host_lock_ref":H?,
//    "last_access":A,"creation":C,"hit_count":H}
//
// Keys and slots are read as a call's are (sim/trace/call_trace_sidecar.h): page hashes get their
// synthetic pages in order of first appearance, snapshot first; slots are one per token, and
// "stride":P says the node stores them page-granular (IndexVector::pages: whole pages of P
// consecutive slots, checked). "locks"
// are the locks held at the snapshot (call G1 of the whole recording took each); restore checks
// that every node's lock_ref is the number of held locks whose start is the node or below it,
// unless the recording found they disagree ("locks_disagree": a lock released twice, say) and said
// so. The storage fields of a HiCache tree (hash_value, backup flags) have no form here: the
// module's tree never has them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tree/radix_tree.h"
#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_sidecar.h"

namespace kvsim::sim {

struct CallTraceSnapshot {
  TreeSnapshot tree;  // held_locks set when they are to be checked against the lock counts
  std::vector<HeldLock> locks;          // the locks held at the snapshot
  std::vector<int64_t> lock_calls;      // ... the call of the whole recording that took each
  std::string locks_disagree;           // the recording's reason not to check them, or ""
  uint64_t first_call = 0;              // the segment's first call in the whole recording
  uint64_t segment = 0;                 // the segment's number in the recording
  size_t announced = 0;                 // node lines the record announces
  size_t line = 0;                      // the record's line
  std::map<NodeId, size_t> node_lines;  // each node's line
};

// Reads the record (`j`: the line's object, with "snapshot"; `where`: "source:line").
CallTraceSnapshot read_snapshot_record(const nlohmann::json& j, const std::string& where,
                                       size_t line, int32_t page_size, EvictionPolicy policy);
// Reads one node line into s.tree.nodes.
void read_snapshot_node(JsonReader& r, size_t line, CallTraceSnapshot& s, const std::string& blob,
                        PageIds& pages);
// Restores the snapshot into a new tree; a snapshot restore refuses is an InputError naming
// `source`, the node's line and the field.
void check_snapshot(const CallTraceSnapshot& s, const std::string& source);
// The record and node lines (tokens and slots inline), for write_call_trace.
std::vector<nlohmann::json> snapshot_to_json(const CallTraceSnapshot& s);

}  // namespace kvsim::sim
