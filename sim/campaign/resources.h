// Resource validation before allocation: what a scenario's pools, its workload and a trace's
// prompts will need, in bytes, checked against a stated limit before anything is allocated, so
// an impossible configuration is refused up front (naming the field and the bytes) instead of
// dying in std::bad_alloc or paging the machine to a halt.
//
// The estimates are upper bounds of the big allocations (pool blocks, per-slot bookkeeping,
// per-request state, token vectors), not of every small one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/scenario.h"
#include "sim/trace/trace.h"

namespace kvsim::sim {

// The default limit: half of the machine's physical memory.
uint64_t default_memory_limit();

struct MemoryNeed {
  std::string field;  // the field that drives it, e.g. "cache.device_tokens"
  uint64_t bytes = 0;
};

// The memory the scenario's executor and run need, largest contributor first.
std::vector<MemoryNeed> scenario_memory(const Scenario& s, bool generates_workload);

// Throws InputError "<source>: field <f>: needs N bytes (...), over the memory limit of M
// bytes (--memory-limit)" when the total exceeds `limit`.
void check_memory(const Scenario& s, bool generates_workload, uint64_t limit,
                  const std::string& source);
// Tokens held in memory (trace prompts, an import): 4 bytes each plus the JSON on the way.
void check_token_memory(uint64_t tokens, uint64_t bytes_per_token, uint64_t limit,
                        const std::string& where, const std::string& field);

// An op trace's configuration plus its requests' tokens (prompt and outputs, with their
// prefix hashes: 12 bytes a token), checked before the replay allocates anything.
void check_trace_memory(const OpTrace& trace, uint64_t limit, const std::string& where);

// "1.5 GiB (1610612736 bytes)".
std::string format_bytes(uint64_t bytes);
// Parses "512M", "2G", "1073741824" (K/M/G/T binary suffixes); false on anything else.
bool parse_bytes(const std::string& text, uint64_t* out);

}  // namespace kvsim::sim
